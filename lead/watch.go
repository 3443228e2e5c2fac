package lead

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/notify"
)

// A worker's death is noticed from two independent events: the tmux
// pane-died hook (which runs orch-notify died), and the exit of the pane's
// process itself, seen here through a pidfd. The second exists because tmux
// 3.3 does not fire pane-died every time (a SIGKILLed process was missed in
// about one case out of five here). Both produce a "died" event; the second
// one to arrive finds the worker already dead and has no effect.

// death is a pane process that exited.
type death struct {
	worker, pane string
	pid          int
}

// watchPane waits, in its own goroutine, for the pane's process to exit: a
// blocking poll(2) on a pidfd with no timeout, woken by the kernel when the
// process ends or by l.stop when the loop ends. Nothing runs in between.
func (l *Loop) watchPane(worker, pane string, pid int) {
	if pid <= 0 || l.stopR < 0 {
		return
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		go send(l, l.deaths, death{worker: worker, pane: pane, pid: pid})
		return
	}
	if err != nil {
		l.log.Warn("cannot watch the pane's process; relying on the tmux hook alone", "worker", worker, "pid", pid, "err", err)
		return
	}
	go func() {
		defer unix.Close(fd)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(l.stopR), Events: unix.POLLIN}}
		for {
			_, err := unix.Poll(fds, -1) // -1: block until one of them is ready
			if !errors.Is(err, unix.EINTR) {
				break // a signal interrupted the wait: wait again, anything else ends it
			}
		}
		if fds[1].Revents != 0 {
			return // the loop is stopping
		}
		if fds[0].Revents != 0 {
			send(l, l.deaths, death{worker: worker, pane: pane, pid: pid})
		}
	}()
}

// reportDeath turns an exited pane process into a died event in the stream,
// so it is handled (and recorded) like one from the tmux hook; the second of
// the two reports finds the worker dead already.
func (l *Loop) reportDeath(ctx context.Context, d death) {
	host, _ := os.Hostname()
	e := event.Event{V: event.Version, ID: event.NewID(), Kind: event.Died, Worker: d.worker, Pane: d.pane,
		Host: host, Status: fmt.Sprintf("pane %s exited (process %d)", d.pane, d.pid), Time: l.cfg.Now().UTC()}
	if _, _, err := notify.PublishOn(l.nc, l.b.Prefix(), e, 5*time.Second); err != nil {
		l.log.Error("report worker death", "worker", d.worker, "err", err)
	}
}
