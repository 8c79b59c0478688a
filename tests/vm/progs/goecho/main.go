// goecho: sechod's server and client in Go, built with CGO_ENABLED=0: its net package makes
// system calls itself, so LD_PRELOAD cannot reach it (BPF mode's test program).
//
//	goecho server ADDR:PORT COUNT        echo COUNT connections until EOF, print "served COUNT"
//	goecho client ADDR:PORT BYTES [HOLD] send, read back, compare; print "ok BYTES proto=P";
//	                                     hold HOLD seconds ("stdin": until stdin ends)
package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: goecho server|client ADDR:PORT COUNT|BYTES [HOLD]")
		os.Exit(2)
	}
	n, _ := strconv.Atoi(os.Args[3])
	switch os.Args[1] {
	case "server":
		os.Exit(server(os.Args[2], n))
	case "client":
		hold := 0
		if len(os.Args) > 4 {
			if os.Args[4] == "stdin" {
				hold = -1
			} else {
				hold, _ = strconv.Atoi(os.Args[4])
			}
		}
		os.Exit(client(os.Args[2], n, hold))
	}
	os.Exit(2)
}

func server(addr string, count int) int {
	l, err := net.Listen("tcp4", addr)
	if err != nil {
		fmt.Println("listen:", err)
		return 1
	}
	fmt.Println("listening")
	var wg sync.WaitGroup
	bad := false
	var mu sync.Mutex
	for i := 0; i < count; i++ {
		c, err := l.Accept()
		if err != nil {
			fmt.Println("accept:", err)
			return 1
		}
		wg.Add(1)
		go func(c net.Conn) {
			defer wg.Done()
			defer c.Close()
			if _, err := io.Copy(c, c); err != nil {
				mu.Lock()
				bad = true
				mu.Unlock()
			}
		}(c)
	}
	wg.Wait()
	fmt.Println("served", count)
	if bad {
		return 1
	}
	return 0
}

func client(addr string, total, hold int) int {
	c, err := net.Dial("tcp4", addr)
	if err != nil {
		fmt.Println("dial:", err)
		return 1
	}
	proto := -1
	if raw, err := c.(*net.TCPConn).SyscallConn(); err == nil {
		raw.Control(func(fd uintptr) {
			proto, _ = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_PROTOCOL)
		})
	}
	out := make([]byte, 16384)
	in := make([]byte, 16384)
	for sent := 0; sent < total; {
		n := len(out)
		if total-sent < n {
			n = total - sent
		}
		for i := 0; i < n; i++ {
			out[i] = byte((sent + i) * 131 % 251)
		}
		if _, err := c.Write(out[:n]); err != nil {
			fmt.Println("write:", err)
			return 1
		}
		if _, err := io.ReadFull(c, in[:n]); err != nil || !bytes.Equal(in[:n], out[:n]) {
			fmt.Printf("CORRUPT after %d bytes proto=%d\n", sent, proto)
			return 1
		}
		sent += n
	}
	fmt.Printf("ok %d proto=%d\n", total, proto)
	if hold < 0 {
		io.Copy(io.Discard, os.Stdin)
	} else {
		time.Sleep(time.Duration(hold) * time.Second)
	}
	c.Close()
	return 0
}
