package netns

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// lead is a TCP listener in the root namespace that hands over each
// connection it accepts.
type lead struct {
	ln    net.Listener
	conns chan net.Conn
}

func listen(t *testing.T, addr string) *lead {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		t.Fatal(err)
	}
	l := &lead{ln: ln, conns: make(chan net.Conn, 16)}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			l.conns <- c
		}
	}()
	return l
}

// client returns bash inside h connecting to l and running script with the
// connection on fd 3.
func (l *lead) client(ctx context.Context, h *Host, script string) *exec.Cmd {
	host, port, _ := net.SplitHostPort(l.ln.Addr().String())
	cmd := h.Command(ctx, "bash", "-c", `exec 3<>/dev/tcp/$ADDR/$PORT || exit 1`+"\n"+script)
	cmd.Env = append(cmd.Env, "ADDR="+host, "PORT="+port, "HOST="+h.Name)
	return cmd
}

// hello has h connect to l and say its name, and checks that l heard it
// from h's own address.
func (l *lead) hello(t *testing.T, h *Host) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if out, err := l.client(ctx, h, `echo "hi from $HOST" >&3`).CombinedOutput(); err != nil {
		t.Fatalf("%s cannot reach %s: %v: %s", h.Name, l.ln.Addr(), err, out)
	}
	select {
	case c := <-l.conns:
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || line != "hi from "+h.Name+"\n" {
			t.Fatalf("from %s: read %q, %v", h.Name, line, err)
		}
		if got, _, _ := net.SplitHostPort(c.RemoteAddr().String()); got != h.Addr {
			t.Fatalf("%s's connection comes from %s, want %s", h.Name, got, h.Addr)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s connected, but %s accepted nothing", h.Name, l.ln.Addr())
	}
}

// cut checks that h cannot reach l: its connection attempt times out.
func (l *lead) cut(t *testing.T, h *Host) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	start := time.Now()
	out, err := l.client(ctx, h, `echo "hi from $HOST" >&3`).CombinedOutput()
	if err == nil {
		t.Fatalf("%s reached %s through a cut link", h.Name, l.ln.Addr())
	}
	t.Logf("%s to %s with the link cut: %v after %s: %s", h.Name, l.ln.Addr(), err, time.Since(start).Round(time.Millisecond), strings.TrimSpace(string(out)))
	select {
	case c := <-l.conns:
		t.Fatalf("%s accepted %s through a cut link", l.ln.Addr(), c.RemoteAddr())
	default:
	}
}

func TestHosts(t *testing.T) {
	Require(t)
	h1, h2 := New(t, "one"), New(t, "two")
	for _, h := range []*Host{h1, h2} {
		if len(h.link) > 15 {
			t.Fatalf("interface name %q is longer than IFNAMSIZ allows", h.link)
		}
	}
	// Strict reverse-path filtering on both ends of two's link must not
	// drop anything: each host's source is routed back through its own link.
	if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+h2.link+"/rp_filter", []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := h2.Command(context.Background(), "bash", "-c", "echo 1 >/proc/sys/net/ipv4/conf/eth0/rp_filter").CombinedOutput(); err != nil {
		t.Fatalf("rp_filter in %s: %v: %s", h2.Name, err, out)
	}

	l := listen(t, RootAddr(t))
	gw := listen(t, h1.Gateway)

	t.Run("both reach the root address", func(t *testing.T) {
		l.hello(t, h1)
		l.hello(t, h2)
	})
	t.Run("two reaches one's gateway", func(t *testing.T) {
		gw.hello(t, h2)
	})

	t.Run("a cut link stalls a connection, then it resumes", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := l.client(ctx, h1, `echo one >&3; read -r line <&3; echo "echo:$line" >&3`)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var c net.Conn
		select {
		case c = <-l.conns:
		case <-time.After(5 * time.Second):
			t.Fatal("one never connected")
		}
		r := bufio.NewReader(c)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if line, err := r.ReadString('\n'); line != "one\n" {
			t.Fatalf("read %q, %v", line, err)
		}

		h1.LinkDown(t)
		if _, err := c.Write([]byte("ping\n")); err != nil {
			t.Fatalf("write with the link cut: %v", err)
		}
		c.SetReadDeadline(time.Now().Add(time.Second))
		if line, err := r.ReadString('\n'); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read with the link cut: %q, %v; want a stall", line, err)
		}
		l.cut(t, h1)
		l.hello(t, h2)
		// Whether one's gateway address stays reachable with one's link
		// down is the kernel's choice (see the package doc): only recorded.
		ctx2, cancel2 := context.WithTimeout(context.Background(), time.Second)
		defer cancel2()
		err := gw.client(ctx2, h2, `echo "hi from $HOST" >&3`).Run()
		t.Logf("two to one's gateway with one's link down: %v", err)
		if err == nil {
			(<-gw.conns).Close()
		}

		h1.LinkUp(t)
		start := time.Now()
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		if line, err := r.ReadString('\n'); line != "echo:ping\n" {
			t.Fatalf("read after the link came back: %q, %v", line, err)
		}
		t.Logf("the stalled connection resumed %s after LinkUp", time.Since(start).Round(time.Millisecond))
		if err := cmd.Wait(); err != nil {
			t.Fatalf("client in one: %v: %s", err, out.String())
		}
		l.hello(t, h1)
		gw.hello(t, h2)
	})
}

// TestParallel has several tests make hosts at once: each gets its own
// addresses, and all reach one root address.
func TestParallel(t *testing.T) {
	Require(t)
	l := listen(t, RootAddr(t))
	for i := range 6 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			h := New(t, fmt.Sprintf("par%d", i))
			t.Logf("New took %s", time.Since(start).Round(time.Millisecond))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if out, err := l.client(ctx, h, `echo "hi from $HOST" >&3`).CombinedOutput(); err != nil {
				t.Fatalf("%s cannot reach %s: %v: %s", h.Name, l.ln.Addr(), err, out)
			}
		})
	}
}

// TestCleanup checks that a test's cleanup leaves nothing: no namespace, no
// link, no address, no process.
func TestCleanup(t *testing.T) {
	Require(t)
	var h *Host
	var root string
	var cmd *exec.Cmd
	exited := make(chan error, 1)
	t.Run("make", func(t *testing.T) {
		h = New(t, "gone")
		root = RootAddr(t)
		h.LinkDown(t)
		cmd = h.Command(context.Background(), "sleep", "1000")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { exited <- cmd.Wait() }()
	})
	select {
	case err := <-exited:
		if err == nil || !strings.Contains(err.Error(), "killed") {
			t.Fatalf("sleep in the namespace ended with %v, want killed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("sleep in the namespace still runs after cleanup")
	}
	if out, _ := ip("netns", "list"); strings.Contains(out, h.Namespace) {
		t.Errorf("namespace %s left: %s", h.Namespace, out)
	}
	if links, _ := linkNames(); links[h.link] {
		t.Errorf("link %s left", h.link)
	}
	if out, _ := ip("-o", "-4", "addr", "show"); strings.Contains(out, h.Gateway+"/") || strings.Contains(out, root+"/") {
		t.Errorf("address %s or %s left: %s", h.Gateway, root, out)
	}
	if out, _ := ip("route", "show", "type", "blackhole"); strings.Contains(out, h.net) {
		t.Errorf("blackhole route for %s left: %s", h.net, out)
	}
}

// TestReap makes what a killed run leaves behind and checks that reaping
// removes it, and nothing of a live process.
func TestReap(t *testing.T) {
	Require(t)
	live := New(t, "live")
	done := exec.Command("true")
	if err := done.Run(); err != nil {
		t.Fatal(err)
	}
	dead := done.Process.Pid
	ns := fmt.Sprintf("%s-%d-1-left", prefix, dead)
	if _, err := ip("netns", "add", ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ip("netns", "del", ns) })
	orphan := exec.Command("ip", "netns", "exec", ns, "sleep", "1000")
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- orphan.Wait() }()
	left := addr(rootSlots).String() // outside RootAddr's range: no clash
	if _, err := ip("addr", "add", left+"/32", "dev", "lo", "label", rootLabel(dead)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ip("addr", "del", left+"/32", "dev", "lo") })

	reap(t.Logf, 0)

	if out, _ := ip("netns", "list"); strings.Contains(out, ns) || !strings.Contains(out, live.Namespace) {
		t.Errorf("after reaping, want %s gone and %s kept: %s", ns, live.Namespace, out)
	}
	if out, _ := ip("-o", "-4", "addr", "show", "dev", "lo"); strings.Contains(out, left+"/") {
		t.Errorf("leftover address %s kept: %s", left, out)
	}
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Error("the process in the leftover namespace still runs")
	}
}

func TestCommandEnv(t *testing.T) {
	Require(t)
	h := New(t, "env")
	t.Setenv("ORCH_NETNS_LEAK", "1")
	cmd := h.Command(context.Background(), "env")
	cmd.Env = append(cmd.Env, "ONLY=this")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != "ONLY=this" {
		t.Fatalf("environment in the namespace: %q, want only ONLY=this", got)
	}
	if err := h.Command(context.Background(), "no-such-program-here").Run(); !errors.Is(err, exec.ErrNotFound) {
		t.Fatalf("a missing program: %v, want exec.ErrNotFound", err)
	}
}
