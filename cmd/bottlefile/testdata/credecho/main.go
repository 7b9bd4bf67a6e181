// Command credecho is the credential test's two ends, built statically.
//
//	credecho serve            an HTTPS server on :8443 (HTTP/1.1 and HTTP/2)
//	                          with the certificate and key in $CERT and $KEY
//	                          (PEM): it answers every request with one line,
//	                          "proto=P x-api-key=V authorization=A", and
//	                          prints the same line on standard output.
//	credecho get URL HEADER ENV
//	                          a GET of URL through $HTTPS_PROXY (as a coding
//	                          agent's HTTP client does), trusting what
//	                          $SSL_CERT_FILE names, with HEADER set to the
//	                          value of the variable ENV; it prints the status
//	                          and the body, and exits 1 unless it got a 200.
package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
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
			line := fmt.Sprintf("proto=%s x-api-key=%s authorization=%s", r.Proto, r.Header.Get("X-Api-Key"), r.Header.Get("Authorization"))
			fmt.Println(line)
			fmt.Fprintln(w, line)
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
	req, err := http.NewRequest(http.MethodGet, url, nil)
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
	body, _ := io.ReadAll(resp.Body)
	fmt.Printf("status=%d client-proto=%s\n%s", resp.StatusCode, resp.Proto, body)
	if resp.StatusCode != 200 {
		os.Exit(1)
	}
}
