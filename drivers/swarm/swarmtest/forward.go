package swarmtest

import (
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// forwardRegistry listens on a loopback port of this process's network
// namespace and forwards each connection to the registry in the hub's
// namespace (the namespace of process hubPID), for the registry's HTTP API
// (bottlefile lists and deletes snapshots through it). It returns the
// registry's URL as this process reaches it. The listener lives as long
// as the process.
func forwardRegistry(hubPID int) (string, error) {
	dial, err := dialerIn(fmt.Sprintf("/proc/%d/ns/net", hubPID))
	if err != nil {
		return "", err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r, err := dial("tcp", Registry)
				if err != nil {
					return
				}
				defer r.Close()
				var wg sync.WaitGroup
				wg.Go(func() { io.Copy(r, c); r.(*net.TCPConn).CloseWrite() })
				io.Copy(c, r)
				c.(*net.TCPConn).CloseWrite()
				wg.Wait()
			}()
		}
	}()
	return "http://" + ln.Addr().String(), nil
}

// dialerIn returns a dial function whose connections are made in the
// network namespace at nsPath: by one OS thread that entered it and never
// leaves (a socket stays in the namespace it was made in, whichever
// thread uses it).
func dialerIn(nsPath string) (func(network, addr string) (net.Conn, error), error) {
	type result struct {
		c   net.Conn
		err error
	}
	type request struct {
		network, addr string
		out           chan result
	}
	reqs := make(chan request)
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		ns, err := os.Open(nsPath)
		if err != nil {
			ready <- err
			return
		}
		defer ns.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			ready <- fmt.Errorf("entering the network namespace %s: %w", nsPath, err)
			return
		}
		ready <- nil
		for r := range reqs {
			c, err := net.Dial(r.network, r.addr)
			r.out <- result{c, err}
		}
	}()
	if err := <-ready; err != nil {
		return nil, err
	}
	return func(network, addr string) (net.Conn, error) {
		out := make(chan result, 1)
		reqs <- request{network, addr, out}
		r := <-out
		return r.c, r.err
	}, nil
}
