package orchctl

import (
	"os"

	"golang.org/x/sys/unix"
)

// readerGone blocks until f, the write end of a pipe, has no reader left,
// and reports true then; false at once for anything but a pipe. The
// kernel wakes the poll (POLLERR) when the last reader closes: no timer.
func readerGone(f *os.File) bool {
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		return false
	}
	fds := []unix.PollFd{{Fd: int32(f.Fd()), Events: 0}}
	for {
		n, err := unix.Poll(fds, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return false
		}
		if n > 0 {
			return fds[0].Revents&(unix.POLLERR|unix.POLLHUP) != 0
		}
	}
}
