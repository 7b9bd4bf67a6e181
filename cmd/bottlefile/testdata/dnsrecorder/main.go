// Command dnsrecorder is the escape suite's recording DNS server: it
// answers every query over UDP and TCP on port 53 with NXDOMAIN and prints
// one line per query on standard output, with the name asked and the raw
// message quoted, so that a test can search what reached it for a secret.
// It is built statically and run FROM scratch; it needs nothing but the
// standard library.
package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
)

var mu sync.Mutex

func record(msg []byte, from net.Addr) {
	mu.Lock()
	defer mu.Unlock()
	fmt.Printf("query %s from %s raw %q\n", qname(msg), from, msg)
}

// qname is the first question's name, or "?" when the message has none.
func qname(msg []byte) string {
	if len(msg) < 13 {
		return "?"
	}
	var labels []string
	for i := 12; i < len(msg); {
		n := int(msg[i])
		if n == 0 {
			return strings.Join(labels, ".")
		}
		if n&0xc0 != 0 || i+1+n > len(msg) {
			break
		}
		labels = append(labels, string(msg[i+1:i+1+n]))
		i += 1 + n
	}
	return "?"
}

// nxdomain answers msg: the same id and question, QR set, RCODE 3.
func nxdomain(msg []byte) []byte {
	if len(msg) < 12 {
		return nil
	}
	out := append([]byte(nil), msg...)
	out[2] = 0x80 | (msg[2] & 0x79) // QR, keep opcode and RD
	out[3] = 0x80 | 3               // RA, NXDOMAIN
	binary.BigEndian.PutUint16(out[6:], 0)
	binary.BigEndian.PutUint16(out[8:], 0)
	binary.BigEndian.PutUint16(out[10:], 0)
	// Drop additional records (EDNS): keep the header and the question.
	end := 12
	for end < len(out) && out[end] != 0 {
		end += 1 + int(out[end])
	}
	end += 5 // the root label, QTYPE, QCLASS
	if end <= len(out) {
		out = out[:end]
	}
	return out
}

func main() {
	pc, err := net.ListenPacket("udp", ":53")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	l, err := net.Listen("tcp", ":53")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("listening")
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var n uint16
				for binary.Read(c, binary.BigEndian, &n) == nil {
					msg := make([]byte, n)
					if _, err := io.ReadFull(c, msg); err != nil {
						return
					}
					record(msg, c.RemoteAddr())
					resp := nxdomain(msg)
					c.Write(binary.BigEndian.AppendUint16(nil, uint16(len(resp))))
					c.Write(resp)
				}
			}()
		}
	}()
	buf := make([]byte, 65535)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			continue
		}
		msg := append([]byte(nil), buf[:n]...)
		record(msg, from)
		if resp := nxdomain(msg); resp != nil {
			pc.WriteTo(resp, from)
		}
	}
}
