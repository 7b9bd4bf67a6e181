package docker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// jsonMessage is one line of the progress stream that build and pull send.
type jsonMessage struct {
	Stream      string `json:"stream"`
	Status      string `json:"status"`
	Error       string `json:"error"`
	ErrorDetail *struct {
		Message string `json:"message"`
	} `json:"errorDetail"`
	Aux json.RawMessage `json:"aux"`
}

// streamResult is what a progress stream reported.
type streamResult struct {
	imageID string   // from an aux {"ID": ...} message (build)
	tail    []string // the last lines of output, for error messages
}

const tailLines = 8

// readStream consumes a build or pull progress stream to its end and
// returns the error it reports, if any.
func readStream(r io.Reader) (streamResult, error) {
	var res streamResult
	dec := json.NewDecoder(r)
	for {
		var m jsonMessage
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return res, nil
			}
			return res, fmt.Errorf("reading the engine's progress stream: %w", err)
		}
		if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
			return res, errors.New(strings.TrimSpace(m.ErrorDetail.Message))
		}
		if m.Error != "" {
			return res, errors.New(strings.TrimSpace(m.Error))
		}
		if len(m.Aux) > 0 {
			var aux struct {
				ID string `json:"ID"`
			}
			if json.Unmarshal(m.Aux, &aux) == nil && aux.ID != "" {
				res.imageID = aux.ID
			}
		}
		for _, line := range strings.Split(m.Stream+m.Status, "\n") {
			if line = strings.TrimSpace(line); line != "" {
				res.tail = append(res.tail, line)
				if len(res.tail) > tailLines {
					res.tail = res.tail[1:]
				}
			}
		}
	}
}
