// A statically linked HTTP service (CGO_ENABLED=0): Go reads the clock through the vDSO, not
// libc, so libfaketime's LD_PRELOAD never reaches it and its Date header keeps real time.  The
// harness must notice that the clock it moved did not move here.
//
// Only the syscall package, so that a cold build takes seconds: every request on a connection
// gets 200 {"ok": true} with a Date header, whatever it asks.
//
//	static-clock PORT
package main

import (
	"os"
	"strconv"
	"syscall"
	"time"
)

func main() {
	port, err := strconv.Atoi(os.Args[1])
	if err != nil {
		panic("usage: static-clock PORT")
	}
	listener, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	check(err)
	check(syscall.SetsockoptInt(listener, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1))
	check(syscall.Bind(listener, &syscall.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}))
	check(syscall.Listen(listener, 64))
	for {
		conn, _, err := syscall.Accept(listener)
		if err == nil {
			go serve(conn)
		}
	}
}

// serve answers each request read from conn (one read per request is enough for GETs).
func serve(conn int) {
	defer syscall.Close(conn)
	buffer := make([]byte, 4096)
	for {
		n, err := syscall.Read(conn, buffer)
		if err != nil || n <= 0 {
			return
		}
		body := `{"ok": true}`
		answer := "HTTP/1.1 200 OK\r\n" +
			"Date: " + time.Now().UTC().Format(time.RFC1123[:len(time.RFC1123)-3]) + "GMT\r\n" +
			"Content-Type: application/json\r\n" +
			"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
		if _, err := syscall.Write(conn, []byte(answer)); err != nil {
			return
		}
	}
}

func check(err error) {
	if err != nil {
		panic(err)
	}
}
