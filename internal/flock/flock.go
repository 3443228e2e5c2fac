// Package flock takes advisory locks on files (flock(2)), released by the
// kernel when the holder exits, however it exits. orch uses one to keep a
// single orch serve per repo and one to serialise its own git commits.
package flock

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Lock is a held lock.
type Lock struct{ f *os.File }

// TryExclusive takes the lock at path without waiting and records our pid
// in it. When another process holds it, the error wraps ErrHeld and the
// returned pid is the holder's (0 if unknown).
func TryExclusive(path string) (*Lock, int, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, 0, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		pid := readPID(f)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, pid, ErrHeld
		}
		return nil, 0, fmt.Errorf("lock %s: %w", path, err)
	}
	l := &Lock{f: f}
	l.RecordPID()
	return l, 0, nil
}

// RecordPID writes our pid into the held lock's file, for Holder to read.
func (l *Lock) RecordPID() {
	if err := l.f.Truncate(0); err == nil {
		l.f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
}

// Exclusive takes the lock at path, waiting while another process holds it.
// The wait is inside the kernel (a blocking flock), not a retry loop.
func Exclusive(path string) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return &Lock{f: f}, nil
}

// Holder returns the pid recorded in the lock file at path, and whether
// that lock is held right now. It finds out by taking a shared lock for an
// instant, so a TryExclusive on the same file at that instant fails: probe
// a file whose holder takes it with Exclusive, never one it must win with
// TryExclusive.
func Holder(path string) (pid int, held bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err == nil {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return readPID(f), false
	}
	return readPID(f), true
}

func readPID(f *os.File) int {
	buf := make([]byte, 32)
	n, _ := f.ReadAt(buf, 0)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	return pid
}

// Unlock releases the lock.
func (l *Lock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the descriptor releases the flock
	l.f = nil
	return err
}
