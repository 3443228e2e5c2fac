package netns

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// Leftovers. A test run killed before its cleanups leaves namespaces (with
// whatever ran in them, and their veth pairs, whose root side is named by
// its slot and carries the namespace's name as its alias) and loopback
// addresses behind. Each carries the pid of the process that made it; the first New
// or RootAddr of a process removes those whose maker is gone. A pid that is
// this process's own is a leftover too: nothing is made before the reaping,
// so it was an earlier process's that had the same pid. The check assumes
// every test process on the machine sees the same /proc, that is, runs in
// one pid namespace.

var reaped sync.Once

// reapOnce removes leftovers once per process, logging to t what it did.
func reapOnce(t testing.TB) {
	reaped.Do(func() { reap(t.Logf, os.Getpid()) })
}

// reap removes leftover namespaces and loopback addresses, counting those
// of pid self as leftovers too. Failures are logged, not fatal: a leftover
// clashes with nothing a test makes.
func reap(logf func(format string, args ...any), self int) {
	out, err := ip("netns", "list")
	if err != nil {
		logf("netns: leftovers: %v", err)
		return
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], prefix+"-") {
			continue
		}
		ns := f[0]
		pid, err := strconv.Atoi(strings.SplitN(ns, "-", 3)[1])
		if err != nil || !gone(pid, self) {
			continue
		}
		var errs []error
		pids, err := nsPids(ns)
		errs = append(errs, err)
		for _, p := range pids {
			errs = append(errs, syscall.Kill(p, syscall.SIGKILL))
		}
		_, err = ip("netns", "del", ns)
		errs = append(errs, err)
		if err := errors.Join(errs...); err != nil {
			logf("netns: leftover namespace %s: %v", ns, err)
			continue
		}
		logf("netns: removed leftover namespace %s, killed %d processes in it", ns, len(pids))
	}

	// A deleted namespace lives on, and its veth pair with it, while a
	// socket in it does: a connection its killed processes left, say,
	// retransmitting into a cut link for minutes. The root side's alias
	// names the namespace.
	links, err := linkNames()
	if err != nil {
		logf("netns: leftovers: %v", err)
		return
	}
	for link := range links {
		slot, err := strconv.ParseUint(strings.TrimPrefix(link, prefix), 16, 16)
		if !strings.HasPrefix(link, prefix) || len(link) != len(prefix)+4 || err != nil || slot >= hostSlots {
			continue
		}
		alias, err := os.ReadFile("/sys/class/net/" + link + "/ifalias")
		f := strings.SplitN(strings.TrimSpace(string(alias)), "-", 3)
		if err != nil || len(f) != 3 || f[0] != prefix {
			continue
		}
		pid, err := strconv.Atoi(f[1])
		if err != nil || !gone(pid, self) {
			continue
		}
		if _, err := ip("link", "del", link); err != nil {
			logf("netns: leftover link %s: %v", link, err)
			continue
		}
		net := addr(4*int(slot)).String() + "/30"
		if out, _ := ip("route", "show", "type", "blackhole", net); strings.TrimSpace(out) != "" {
			ip("route", "del", "blackhole", net, "metric", blackholeMetric)
		}
		logf("netns: removed leftover link %s of %s", link, alias)
	}

	out, err = ip("-o", "-4", "addr", "show", "dev", "lo")
	if err != nil {
		logf("netns: leftovers: %v", err)
		return
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || f[2] != "inet" {
			continue
		}
		for _, label := range f[4:] {
			// ip -o ends each address's first line with a backslash.
			hex, ok := strings.CutPrefix(strings.TrimSuffix(label, "\\"), "lo:"+prefix)
			if !ok {
				continue
			}
			pid, err := strconv.ParseInt(hex, 16, 32)
			if err != nil || !gone(int(pid), self) {
				break
			}
			if _, err := ip("addr", "del", f[3], "dev", "lo"); err != nil {
				logf("netns: leftover address %s: %v", f[3], err)
			} else {
				logf("netns: removed leftover address %s of pid %d", f[3], pid)
			}
			break
		}
	}
}

// gone says whether process pid, which made a leftover, has ended. A
// zombie has: its parent, or an init that reaps lazily, has yet to wait.
func gone(pid, self int) bool {
	if pid == self {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	// The state follows the command name, which is in parentheses and may
	// hold any character.
	_, rest, ok := bytes.Cut(stat[bytes.LastIndexByte(stat, ')')+1:], []byte(" "))
	return err == nil && ok && len(rest) > 0 && (rest[0] == 'Z' || rest[0] == 'X')
}
