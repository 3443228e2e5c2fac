package orchctl

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/nats-io/nats.go"
	"golang.org/x/sys/unix"

	"github.com/orch-dev/orch/board"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/notify"
	"github.com/orch-dev/orch/plans"
)

// NotServing is a board's note while no orch serve runs.
const NotServing = "orch serve is not running: this is its last record; the board comes back by itself when it starts"

// Follow feeds show with the board's view of the repo at root until ctx
// ends: a frame from the lead loop each time it saves (a subscription on
// the broker), and, while no orch serve runs, the loop's last record from
// state.json with a note. It learns that orch serve started or stopped
// from fsnotify on .orch/ and from the broker connection closing, never
// by looking on a timer. show is called from one goroutine.
func Follow(ctx context.Context, root string, show func(board.View)) error {
	od := orchdir.Of(root)
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	defer w.Close()
	if err := w.Add(od); err != nil {
		return fmt.Errorf("watch: %w (run orch init first)", err)
	}
	frames := make(chan []byte, 1)
	// closed gets a value when a connection ended: Follow then looks at
	// its current one (an older one's end, or one dialBoard gave up, comes
	// late and changes nothing; connect keeps a live connection).
	closed := make(chan struct{}, 1)
	exited := make(chan struct{}, 1)
	exits, err := newExitWaiter(exited)
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	defer exits.stop()
	var nc *nats.Conn
	defer func() {
		if nc != nil {
			nc.Close()
		}
	}()
	connect := func() {
		if nc != nil && !nc.IsClosed() {
			return
		}
		nc = nil
		pid := ServePID(root)
		if pid == 0 {
			show(offline(root))
			return
		}
		c, err := dialBoard(od, frames, closed)
		if err != nil {
			if ServePID(root) == 0 {
				show(offline(root)) // it stopped while we dialled
				return
			}
			v := offline(root)
			v.Note = "orch serve is starting or unreachable (" + err.Error() + "); the board connects when its broker is up"
			show(v)
			// Its broker may never come up: it is stopping (orch down
			// closes the broker before it lets go of serve.pid, a kill
			// closes the sockets in no set order with the lock), and no
			// file changes after. Its exit is the event that says so.
			exits.wait(pid)
			return
		}
		nc = c
	}
	connect()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-exited:
			connect()
		case b := <-frames:
			f, err := board.ParseFrame(b)
			if err != nil {
				continue // not a frame of this orch: nothing to show
			}
			defs, _, _ := plans.LoadEach(root)
			show(board.Build(f, defs, time.Now()))
		case <-closed:
			connect()
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			switch filepath.Base(ev.Name) {
			case orchdir.Broker, orchdir.ServePID:
				connect()
			}
		case err := <-w.Errors:
			if err != nil {
				return fmt.Errorf("watch: %w", err)
			}
		}
	}
}

// dialBoard connects with the lead's credential, subscribes to frames and
// asks for the latest one. closed gets a value when the connection ends
// (orch serve stopped).
func dialBoard(od string, frames chan []byte, closed chan struct{}) (*nats.Conn, error) {
	cfg, err := notify.LeadConfig(od)
	if err != nil {
		return nil, err
	}
	nc, err := notify.Connect(cfg, "orch-watch")
	if err != nil {
		return nil, err
	}
	nc.SetClosedHandler(func(*nats.Conn) {
		select {
		case closed <- struct{}{}:
		default: // one is waiting: Follow looks at its connection then
		}
	})
	// Only this connection's subscription delivers (one goroutine), and
	// Follow only takes: emptying then refilling the slot cannot block.
	deliver := func(b []byte) { board.Replace(frames, b) }
	var parts board.Assembler // touched by the subscription's goroutine only
	if _, err := nc.Subscribe(board.Subject(cfg.Prefix), func(m *nats.Msg) {
		if b, ok := parts.Add(m); ok {
			deliver(b)
		}
	}); err != nil {
		nc.Close()
		return nil, err
	}
	// Subscribed (the server has it once Flush returns): now ask for a
	// frame; it comes on the subscription.
	if err := nc.Flush(); err != nil {
		nc.Close()
		return nil, err
	}
	if err := nc.Publish(board.NowSubject(cfg.Prefix), nil); err != nil {
		nc.Close()
		return nil, err
	}
	return nc, nil
}

// offline is the view of the loop's last record while it does not run.
func offline(root string) board.View {
	st, err := state.Load(orchdir.Of(root))
	if err != nil {
		return board.View{Note: "cannot read the lead loop's record: " + err.Error()}
	}
	defs, _, _ := plans.LoadEach(root)
	v := board.Build(board.FrameOf(st, board.SaidOf(st), time.Now()), defs, time.Now())
	v.Serving, v.Note = false, NotServing
	return v
}

// exitWaiter tells Follow when an orch serve it could not reach exits:
// a pidfd per pid, waited on in poll(2) with an eventfd that stop makes
// readable, so no waiter outlives Follow. The wait is the kernel's, not
// a look on a timer.
type exitWaiter struct {
	exited  chan<- struct{}
	stopFD  int
	wg      sync.WaitGroup
	waiting map[int]bool // touched by Follow's goroutine only
}

func newExitWaiter(exited chan<- struct{}) (*exitWaiter, error) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	return &exitWaiter{exited: exited, stopFD: fd, waiting: map[int]bool{}}, nil
}

// wait sends on exited once pid has exited (at once if it is gone). One
// waiter per pid.
func (w *exitWaiter) wait(pid int) {
	if w.waiting[pid] {
		return
	}
	w.waiting[pid] = true
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		w.signal() // gone already (or no pidfds: look again now)
		return
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer unix.Close(fd)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(w.stopFD), Events: unix.POLLIN}}
		for {
			_, err := unix.Poll(fds, -1)
			if err == unix.EINTR {
				continue
			}
			if err == nil && fds[1].Revents != 0 {
				return // Follow ended
			}
			w.signal()
			return
		}
	}()
}

func (w *exitWaiter) signal() {
	select {
	case w.exited <- struct{}{}:
	default:
	}
}

// stop ends every wait and releases the eventfd.
func (w *exitWaiter) stop() {
	unix.Write(w.stopFD, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	w.wg.Wait()
	unix.Close(w.stopFD)
}
