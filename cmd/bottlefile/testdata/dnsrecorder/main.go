// Command dnsrecorder is the escape suite's recording DNS server: it
// answers every query over UDP and TCP on port 53 with NXDOMAIN and prints
// one line per query on standard output, with the name asked and the raw
// message quoted, so that a test can search what reached it for a secret.
//
// A name whose first label spells an address answers with it: the A record
// of v4-10-0-0-1.anything is 10.0.0.1, the AAAA record of
// v6-64-ff9b-1--7f00-1.anything is 64:ff9b:1::7f00:1 (the other type has
// no record), so that a test can make an allowed name resolve to any
// address.
// It is built statically and run FROM scratch; it needs nothing but the
// standard library.
package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
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

// answer answers msg: the address its name spells, else NXDOMAIN.
func answer(msg []byte) []byte {
	resp := nxdomain(msg)
	if len(resp) < 17 {
		return resp
	}
	first, _, _ := strings.Cut(qname(msg), ".")
	var a netip.Addr
	var err error
	switch {
	case strings.HasPrefix(first, "v4-"):
		a, err = netip.ParseAddr(strings.ReplaceAll(first[3:], "-", "."))
	case strings.HasPrefix(first, "v6-"):
		a, err = netip.ParseAddr(strings.ReplaceAll(first[3:], "-", ":"))
	default:
		return resp
	}
	if err != nil {
		return resp
	}
	resp[3] = 0x80 // RA, NOERROR
	qtype := binary.BigEndian.Uint16(resp[len(resp)-4:])
	if (qtype == 1 && !a.Is4()) || (qtype == 28 && !a.Is6()) || (qtype != 1 && qtype != 28) {
		return resp // no record of that type
	}
	binary.BigEndian.PutUint16(resp[6:], 1) // one answer
	rr := []byte{0xc0, 12}                  // the name: a pointer to the question's
	rr = binary.BigEndian.AppendUint16(rr, qtype)
	rr = binary.BigEndian.AppendUint16(rr, 1)  // IN
	rr = binary.BigEndian.AppendUint32(rr, 60) // TTL
	raw := a.AsSlice()
	rr = binary.BigEndian.AppendUint16(rr, uint16(len(raw)))
	return append(append(resp, rr...), raw...)
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
					resp := answer(msg)
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
		if resp := answer(msg); resp != nil {
			pc.WriteTo(resp, from)
		}
	}
}
