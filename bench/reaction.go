package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
	"unsafe"

	"github.com/nats-io/nats.go"
	"golang.org/x/sys/unix"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/notify"
	"github.com/orch-dev/orch/plans"
)

// fileOpen is one IN_OPEN inotify event: a file in a watched directory was
// opened, seen by this process at At.
type fileOpen struct {
	Name string
	At   time.Time
}

// openWatch reports every open of a file in one directory. The lead loop's
// done handler opens RESULT.md (plans.ReadResult) right after it has parsed
// the event and checked the sender, before any git command: the first open
// after a publish is the handler running, seen from outside the process's
// code.
type openWatch struct {
	f  *os.File
	ch chan fileOpen
}

func watchOpens(dir string) (*openWatch, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_OPEN); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("inotify %s: %w", dir, err)
	}
	// Non-blocking and wrapped in an *os.File, so reads park on the runtime's
	// poller (epoll) instead of holding a thread.
	w := &openWatch{f: os.NewFile(uintptr(fd), "inotify"), ch: make(chan fileOpen, 1024)}
	go w.read()
	return w, nil
}

func (w *openWatch) read() {
	buf := make([]byte, 64*1024)
	for {
		n, err := w.f.Read(buf)
		at := time.Now()
		if err != nil {
			close(w.ch)
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := string(bytes.TrimRight(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)], "\x00"))
			off += unix.SizeofInotifyEvent + int(ev.Len)
			select {
			case w.ch <- fileOpen{Name: name, At: at}:
			default:
			}
		}
	}
}

func (w *openWatch) close() { w.f.Close() }

// next returns the time of the first open of name seen at or after since.
func (w *openWatch) next(ctx context.Context, name string, since time.Time) (time.Time, error) {
	t := time.NewTimer(5 * time.Second) // a deadline, not a poll
	defer t.Stop()
	for {
		select {
		case fo, ok := <-w.ch:
			if !ok {
				return time.Time{}, errors.New("inotify closed")
			}
			if fo.Name == name && !fo.At.Before(since) {
				return fo.At, nil
			}
		case <-t.C:
			return time.Time{}, fmt.Errorf("no open of %s seen within 5s", name)
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}
}

func (w *openWatch) drain() {
	for {
		select {
		case <-w.ch:
		default:
			return
		}
	}
}

// reactionResult holds, per way of sending done, the delays from the
// sender's anchor (the in-process publisher's ack, orch-notify's exit) to
// what the lead loop does next.
type reactionResult struct {
	N int // rounds of each kind
	// In-process publisher (worker NKey over loopback TCP, one open
	// connection), anchored at the moment PublishOn returned with the ack.
	AckToOpen, AckToHarvest, AckToCallback dist
	PubToAck                               dist
	OpenBeforeAck                          int // rounds where the handler opened RESULT.md before the ack reached the publisher
	// orch-notify process, anchored at the moment it was reaped.
	ExitToOpen, ExitToHarvest, ExitToCallback dist
	OpenBeforeExit                            int
	Accepted                                  int
}

// reaction runs n rounds of each kind, alternating, against a lead loop with
// one cat worker; each round the plan is dispatched again (untimed) and a
// done is sent for it.
func reaction(ctx context.Context, o options, notifyBin, dir string) (reactionResult, error) {
	var res reactionResult
	sl, err := startLead(ctx, dir, fmt.Sprintf("orch-bench-%d-react", os.Getpid()), o.verbose)
	if err != nil {
		return res, err
	}
	defer sl.close()
	// The plan folder exists once NewPlan has run.
	ow, err := watchOpens(filepath.Dir(plans.ResultPath(sl.root, benchPlan)))
	if err != nil {
		return res, err
	}
	defer ow.close()
	leadCfg, err := notify.LeadConfig(sl.orchDir)
	if err != nil {
		return res, err
	}
	lc, err := notify.Connect(leadCfg, "bench-callbacks")
	if err != nil {
		return res, err
	}
	defer lc.Close()
	cbs := make(chan time.Time, 64)
	sub, err := lc.Subscribe(leadCfg.Prefix+".cb.>", func(*nats.Msg) {
		select {
		case cbs <- time.Now():
		default:
		}
	})
	if err != nil {
		return res, err
	}
	defer sub.Unsubscribe()
	if err := lc.Flush(); err != nil {
		return res, err
	}
	seed, err := os.ReadFile(orchdir.WorkerKey(sl.orchDir, benchWorker))
	if err != nil {
		return res, err
	}
	wc, err := notify.Connect(notify.Config{URL: sl.url, Seed: bytes.TrimSpace(seed), Inbox: event.WorkerInboxOf(benchWorker), Timeout: 3 * time.Second}, "bench-worker")
	if err != nil {
		return res, err
	}
	defer wc.Close()
	host, _ := os.Hostname()

	var ackOpen, ackHarv, ackCb, pubAck, exitOpen, exitHarv, exitCb []time.Duration
	warm := min(o.warmup, 5)
	for r := 0; r < warm+2*o.reactionN; r++ {
		if err := sl.prepDone(ctx); err != nil {
			return res, fmt.Errorf("reaction round %d: %w", r+1, err)
		}
		ow.drain()
		drainTimes(cbs)
		sl.tap.drain()
		inProcess := r%2 == 0
		var anchor, start time.Time
		if inProcess {
			e := event.New(event.Done, benchPlan, "ok", benchWorker, host)
			start = time.Now()
			if _, _, err := notify.PublishOn(wc, leadCfg.Prefix, e, 5*time.Second); err != nil {
				return res, fmt.Errorf("reaction round %d: publish: %w", r+1, err)
			}
			anchor = time.Now()
		} else {
			cmd := exec.Command(notifyBin, "done", benchPlan, "ok")
			cmd.Env, cmd.Dir = sl.notifyEnv(), sl.root
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			start = time.Now()
			err := cmd.Run()
			anchor = time.Now()
			if err != nil || strings.Contains(stderr.String(), "spool") {
				return res, fmt.Errorf("reaction round %d: orch-notify: %v %s", r+1, err, strings.TrimSpace(stderr.String()))
			}
		}
		harv, err := sl.tap.waitFor(ctx, 15*time.Second, "harvested", func(l logRec) bool {
			return harvestedOne(l.Msg, l.Attrs, benchPlan) ||
				l.Attrs["plan"] == benchPlan && (l.Msg == "refused" || strings.HasPrefix(l.Msg, "event not handled"))
		})
		if err != nil {
			return res, fmt.Errorf("reaction round %d: %w", r+1, err)
		}
		if !harvestedOne(harv.Msg, harv.Attrs, benchPlan) {
			return res, fmt.Errorf("reaction round %d: the lead loop said %q %v", r+1, harv.Msg, harv.Attrs)
		}
		cbAt, err := nextTime(ctx, cbs, "callback")
		if err != nil {
			return res, fmt.Errorf("reaction round %d: %w", r+1, err)
		}
		opened, err := ow.next(ctx, filepath.Base(plans.ResultPath(sl.root, benchPlan)), start)
		if err != nil {
			return res, fmt.Errorf("reaction round %d: %w", r+1, err)
		}
		if r < warm {
			continue
		}
		res.Accepted++
		if inProcess {
			pubAck = append(pubAck, anchor.Sub(start))
			ackOpen = append(ackOpen, opened.Sub(anchor))
			ackHarv = append(ackHarv, harv.At.Sub(anchor))
			ackCb = append(ackCb, cbAt.Sub(anchor))
			if opened.Before(anchor) {
				res.OpenBeforeAck++
			}
		} else {
			exitOpen = append(exitOpen, opened.Sub(anchor))
			exitHarv = append(exitHarv, harv.At.Sub(anchor))
			exitCb = append(exitCb, cbAt.Sub(anchor))
			if opened.Before(anchor) {
				res.OpenBeforeExit++
			}
		}
	}
	res.N = o.reactionN
	res.AckToOpen, res.AckToHarvest, res.AckToCallback, res.PubToAck = distOf(ackOpen), distOf(ackHarv), distOf(ackCb), distOf(pubAck)
	res.ExitToOpen, res.ExitToHarvest, res.ExitToCallback = distOf(exitOpen), distOf(exitHarv), distOf(exitCb)
	return res, nil
}

func drainTimes(ch chan time.Time) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

func nextTime(ctx context.Context, ch chan time.Time, what string) (time.Time, error) {
	t := time.NewTimer(15 * time.Second) // a deadline, not a poll
	defer t.Stop()
	select {
	case at := <-ch:
		return at, nil
	case <-t.C:
		return time.Time{}, errors.New("no " + what + " within 15s")
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
}
