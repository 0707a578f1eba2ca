package httpapi_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/httpapi"
)

// closedWithin reports whether the server closes conn (a read ends in EOF
// or an error other than the test's own deadline) within d.
func closedWithin(t *testing.T, conn net.Conn, d time.Duration) bool {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, conn)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return true
}

func dial(t *testing.T, addr net.Addr) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestSlowClientsAreCut: a client that sends its headers or its body
// slowly loses the connection at the read timeouts, and an idle
// kept-alive one at the idle timeout; none holds a connection for ever.
func TestSlowClientsAreCut(t *testing.T) {
	r := newRig(t, &httpapi.Options{Listen: "127.0.0.1:0", Limits: httpapi.Limits{
		ReadHeader: 300 * time.Millisecond, Read: 600 * time.Millisecond, Write: 400 * time.Millisecond, Idle: 500 * time.Millisecond,
	}})
	addr := r.srv.Addr()

	slowHeader := dial(t, addr)
	io.WriteString(slowHeader, "GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n")
	if !closedWithin(t, slowHeader, 5*time.Second) {
		t.Error("a client sending its headers slowly kept the connection 5s (read header timeout 300ms)")
	}

	slowBody := dial(t, addr)
	io.WriteString(slowBody, "POST /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"file\":")
	if !closedWithin(t, slowBody, 5*time.Second) {
		t.Error("a client sending its body slowly kept the connection 5s (read timeout 600ms)")
	}

	idle := dial(t, addr)
	io.WriteString(idle, "GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	res, err := http.ReadResponse(bufio.NewReader(idle), nil)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("health: %v %v", res, err)
	}
	if !closedWithin(t, idle, 5*time.Second) {
		t.Error("an idle kept-alive connection stayed open 5s (idle timeout 500ms)")
	}
}

// TestWriteTimeoutIsPerWrite: the write timeout bounds each write of an
// answer, not how long the answer takes to compute (a call connects its
// server first) nor how long an event stream lasts.
func TestWriteTimeoutIsPerWrite(t *testing.T) {
	r := newRig(t, &httpapi.Options{Listen: "127.0.0.1:0", Limits: httpapi.Limits{Read: 300 * time.Millisecond, Write: 300 * time.Millisecond}})
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A server that takes a second to start: the call's answer waits for
	// it, far past the write timeout.
	r.workflow("slow.yaml", fmt.Sprintf("name: slow\nservers:\n  slow: {command: sh, args: [-c, 'sleep 1; exec \"$0\" demo-server', %q]}\nsteps:\n  - {id: a, server: slow, tool: greet, with: {name: x}}\n", exe))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.srv.Addr().String()+"/api/events", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	time.Sleep(time.Second) // past both timeouts
	// Over TCP: the call starts its server and lists its tools before it
	// answers.
	res2, err := http.Post("http://"+r.srv.Addr().String()+"/api/calls", "application/json",
		strings.NewReader(`{"server": "slow", "tool": "greet", "args": ["name=Ada"], "workflow": "slow.yaml"}`))
	if err != nil {
		t.Fatalf("a call over TCP: %v", err)
	}
	res2.Body.Close()
	if res2.StatusCode != http.StatusAccepted {
		t.Fatalf("a call over TCP: %d", res2.StatusCode)
	}
	for line := range lines {
		if strings.HasPrefix(line, "event: run_finished") {
			return
		}
	}
	t.Fatal("the event stream ended before the run finished: cut by a timeout")
}

// TestConnectionsPerClientAreCapped: one client address holds at most
// PerClient connections; the next is closed as it is accepted, and a
// place freed is taken again.
func TestConnectionsPerClientAreCapped(t *testing.T) {
	const max = 4
	r := newRig(t, &httpapi.Options{Listen: "127.0.0.1:0", Limits: httpapi.Limits{PerClient: max}})
	addr := r.srv.Addr()
	var held []net.Conn
	for range max {
		c := dial(t, addr)
		io.WriteString(c, "GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n") // and never ends its headers
		held = append(held, c)
	}
	time.Sleep(100 * time.Millisecond) // the server has accepted them
	over := dial(t, addr)
	if !closedWithin(t, over, 3*time.Second) {
		t.Fatalf("connection %d of one client was kept (cap %d)", max+1, max)
	}
	held[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		res, err := http.Get("http://" + addr.String() + "/api/health")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("a place freed was not taken again: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Every loopback address is one client: with three places held from
	// 127.0.0.1 (and the GET's connection, until the server has let it
	// go), 127.0.0.2 gets one place at most, not a cap of its own.
	kept := 0
	for range max {
		c, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).Dial("tcp", addr.String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
		if !closedWithin(t, c, time.Second) {
			kept++
		}
	}
	if kept > 1 {
		t.Errorf("%d connections from 127.0.0.2 were kept while 127.0.0.1 held %d of the %d places: loopback is one client", kept, max-1, max)
	}
	// The unix socket has no cap: the owner's commands always get through.
	if code := r.do(http.MethodGet, "/api/health", nil, nil); code != http.StatusOK {
		t.Errorf("health over the socket: %d", code)
	}
}
