package egress

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestCredentialConnectionClose: Connection: close, from the agent or
// from the credential host, closes the agent's connection once the
// answer is out: a pipelined second request is not held for the idle
// timeouts, and the answer before it arrives whole.
func TestCredentialConnectionClose(t *testing.T) {
	for _, tt := range []struct {
		name        string
		agentCloses bool
	}{{"agent asks", true}, {"upstream asks", false}} {
		t.Run(tt.name, func(t *testing.T) {
			// Connection: close is HTTP/1.1's: the upstream speaks it.
			rig := newCredentialRigWith(t, false)
			rig.tg.IdleTimeout = 15 * time.Second // as in the audit
			rig.reply = func(w http.ResponseWriter, r *http.Request) {
				if !tt.agentCloses {
					w.Header().Set("Connection", "close")
				}
				fmt.Fprint(w, "first answer")
			}
			c, _, resp, _ := rig.tg.connect(t, fmt.Sprintf("example.com:%d", rig.port))
			if resp.StatusCode != 200 {
				t.Fatalf("CONNECT: %s", resp.Status)
			}
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(rig.caCert)
			tc := tls.Client(c, &tls.Config{ServerName: "example.com", RootCAs: pool, NextProtos: []string{"http/1.1"}})
			closeHdr := ""
			if tt.agentCloses {
				closeHdr = "Connection: close\r\n"
			}
			start := time.Now()
			fmt.Fprintf(tc, "GET /1 HTTP/1.1\r\nHost: example.com\r\n%s\r\nGET /2 HTTP/1.1\r\nHost: example.com\r\n\r\n", closeHdr)
			tc.SetDeadline(time.Now().Add(10 * time.Second))
			br := bufio.NewReader(tc)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			if string(body) != "first answer" {
				t.Fatalf("first answer: %q", body)
			}
			rest, err := io.ReadAll(br)
			if took := time.Since(start); err != nil || took > 3*time.Second {
				t.Fatalf("the connection closed after %v (%v), want at once", took, err)
			}
			if strings.Contains(string(rest), "HTTP/1.1") {
				t.Fatalf("the pipelined request was answered after Connection: close: %q", rest)
			}
			<-rig.seen
		})
	}
}
