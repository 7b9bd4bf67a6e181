// Command credecho is the credential test's two ends, built statically.
//
//	credecho serve            an HTTPS server on :8443 (HTTP/1.1 and HTTP/2)
//	                          with the certificate and key in $CERT and $KEY
//	                          (PEM): it prints one line per request on
//	                          standard output, "proto=P x-api-key=V
//	                          authorization=A", and answers with that line,
//	                          the x-api-key's base64 and percent-encoding,
//	                          and the request body, and the same in headers
//	                          (an API whose debug or error answers echo
//	                          the request).
//	credecho get URL HEADER ENV
//	                          a GET of URL through $HTTPS_PROXY (as a coding
//	                          agent's HTTP client does), trusting what
//	                          $SSL_CERT_FILE names, with HEADER set to the
//	                          value of the variable ENV ($METHOD and $BODY,
//	                          when set, make it another request); it prints
//	                          the status, the answer's headers and the body,
//	                          and exits 1 unless it got a 200.
package main

import (
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: credecho serve | credecho get URL HEADER ENV")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "serve":
		serve()
	case "get":
		if len(os.Args) != 5 {
			fmt.Fprintln(os.Stderr, "usage: credecho get URL HEADER ENV")
			os.Exit(2)
		}
		get(os.Args[2], os.Args[3], os.Getenv(os.Args[4]))
	default:
		os.Exit(2)
	}
}

func serve() {
	cert, err := tls.X509KeyPair([]byte(os.Getenv("CERT")), []byte(os.Getenv("KEY")))
	if err != nil {
		fmt.Fprintln(os.Stderr, "credecho:", err)
		os.Exit(1)
	}
	srv := &http.Server{
		Addr: ":8443",
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			key := r.Header.Get("X-Api-Key")
			line := fmt.Sprintf("proto=%s x-api-key=%s authorization=%s", r.Proto, key, r.Header.Get("Authorization"))
			fmt.Println(line)
			body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			b64 := base64.StdEncoding.EncodeToString([]byte(key))
			pct := ""
			for i := 0; i < len(key); i++ {
				pct += fmt.Sprintf("%%%02X", key[i])
			}
			w.Header().Set("X-Echo-Key", key)
			w.Header().Set("X-Echo-Key-Base64", b64)
			fmt.Fprintf(w, "%s\nbase64=%s\npercent=%s\nbody=%s\n", line, b64, pct, body)
		}),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}},
		ReadHeaderTimeout: 10 * time.Second,
	}
	fmt.Println("listening")
	if err := srv.ListenAndServeTLS("", ""); err != nil {
		fmt.Fprintln(os.Stderr, "credecho:", err)
		os.Exit(1)
	}
}

func get(url, header, value string) {
	method := os.Getenv("METHOD")
	if method == "" {
		method = http.MethodGet
	}
	var body io.Reader
	if b := os.Getenv("BODY"); b != "" {
		body = strings.NewReader(b)
	}
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		fmt.Fprintln(os.Stderr, "credecho:", err)
		os.Exit(2)
	}
	if value != "" {
		req.Header.Set(header, value)
	}
	c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true}}
	resp, err := c.Do(req)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	fmt.Printf("status=%d client-proto=%s\n", resp.StatusCode, resp.Proto)
	resp.Header.Write(os.Stdout)
	fmt.Printf("\n%s", answer)
	if resp.StatusCode != 200 {
		os.Exit(1)
	}
}
