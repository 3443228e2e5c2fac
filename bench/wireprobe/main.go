// Command wireprobe measures the broker's side of one orch-notify done,
// without any process start-up: a long-lived client speaking the NATS
// protocol by hand over TCP, n times in a row, times the broker's three
// answers (INFO after the dial, PONG after CONNECT + PING, the JetStream
// PubAck after SUB + HPUB). It is a measuring tool only; orch-notify itself
// goes through nats.go.
//
//	sleep infinity | go run ./bench -bare-server /tmp/bare &   # or use a running orch serve's .orch directory
//	go run ./bench/wireprobe -dir /tmp/bare [-n 300] [-pause 5ms]
package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/notify"
)

func main() {
	dir := flag.String("dir", "", "the broker's directory (.orch, or a -bare-server directory): broker.json and creds/worker.nk")
	n := flag.Int("n", 300, "rounds")
	pause := flag.Duration("pause", 5*time.Millisecond, "idle time between rounds, so that each finds the broker idle, as a worker's notifier does")
	flag.Parse()
	if err := run(*dir, *n, *pause); err != nil {
		fmt.Fprintln(os.Stderr, "wireprobe:", err)
		os.Exit(1)
	}
}

func run(dir string, n int, pause time.Duration) error {
	if dir == "" || n < 1 {
		return fmt.Errorf("usage: wireprobe -dir <broker dir> [-n 300]")
	}
	ep, err := notify.ReadEndpoint(dir)
	if err != nil {
		return err
	}
	seed, err := os.ReadFile(orchdir.WorkerKey(dir, "w1"))
	if err != nil {
		return err
	}
	kp, err := nkeys.FromSeed([]byte(strings.TrimSpace(string(seed))))
	if err != nil {
		return err
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return err
	}
	addr := strings.TrimPrefix(ep.URL, "nats://")
	subject := event.Subject(ep.Prefix, event.Event{Kind: event.Done, Worker: "w1"})
	phases := []string{"dial -> INFO", "CONNECT+PING -> PONG", "SUB+HPUB -> PubAck", "all three"}
	d := make([][]time.Duration, len(phases))
	for i := 0; i < n; i++ {
		t0 := time.Now()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return err
		}
		br := bufio.NewReaderSize(c, 32768)
		line, err := br.ReadString('\n')
		if err != nil {
			return err
		}
		t1 := time.Now()
		var info struct{ Nonce string }
		if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "INFO ")), &info); err != nil {
			return fmt.Errorf("INFO: %v", err)
		}
		sig, err := kp.Sign([]byte(info.Nonce))
		if err != nil {
			return err
		}
		t2 := time.Now()
		fmt.Fprintf(c, "CONNECT {\"verbose\":false,\"pedantic\":false,\"nkey\":%q,\"sig\":%q,\"protocol\":1,\"headers\":true,\"no_responders\":true}\r\nPING\r\n",
			pub, base64.RawURLEncoding.EncodeToString(sig))
		if err := readUntil(br, "PONG"); err != nil {
			return err
		}
		t3 := time.Now()
		e := event.New(event.Done, "probe", "ok", "w1", "wireprobe")
		body := e.Marshal()
		hdr := "NATS/1.0\r\nNats-Msg-Id: " + e.ID + "\r\n\r\n"
		fmt.Fprintf(c, "SUB _W.w1.probe 1\r\nHPUB %s _W.w1.probe %d %d\r\n%s%s\r\n", subject, len(hdr), len(hdr)+len(body), hdr, body)
		if err := readUntil(br, "MSG", "HMSG"); err != nil {
			return err
		}
		t4 := time.Now()
		c.Close()
		time.Sleep(pause) // the broker goes idle again, as between two workers' callbacks
		for j, x := range []time.Duration{t1.Sub(t0), t3.Sub(t2), t4.Sub(t3), t1.Sub(t0) + t4.Sub(t2)} {
			d[j] = append(d[j], x)
		}
	}
	for j, name := range phases {
		s := d[j]
		sort.Slice(s, func(a, b int) bool { return s[a] < s[b] })
		fmt.Printf("%-22s median %.3f ms  p90 %.3f ms\n", name, float64(s[len(s)/2])/1e6, float64(s[len(s)*9/10])/1e6)
	}
	return nil
}

// readUntil reads protocol lines until one starts with one of prefixes; an
// -ERR is an error.
func readUntil(br *bufio.Reader, prefixes ...string) error {
	for {
		l, err := br.ReadString('\n')
		if err != nil {
			return err
		}
		if strings.HasPrefix(l, "-ERR") {
			return fmt.Errorf("broker: %s", strings.TrimSpace(l))
		}
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				return nil
			}
		}
	}
}
