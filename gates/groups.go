package gates

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/orch-dev/orch/internal/atomicfile"
)

// groupsFile lists the process groups of running gates, one per line.
const groupsFile = "gates.pgids"

// Track records the process groups of running gates and setup commands,
// so a lead loop that stops (or dies) leaves none running past its
// deadline: they are killed when it stops, and at the next start. An error
// (the Runner is stopping, the record cannot be written) means the command
// must not start. It is RunTracked's started.
func (r *Runner) Track(pgid int, running bool) error {
	if running && r.cfg.Fault != nil {
		r.cfg.Fault("gate-started") // started, not yet recorded: its shell is still waiting for the go
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.groups == nil {
		r.groups = map[int]bool{}
	}
	if !running {
		delete(r.groups, pgid)
		writeGroups(r.orchDir, r.groups) // a group left listed is only killed again, if its leader is still the same
		return nil
	}
	if r.stopping.Load() {
		return ErrStopping
	}
	r.groups[pgid] = true
	if err := writeGroups(r.orchDir, r.groups); err != nil {
		delete(r.groups, pgid)
		return err
	}
	return nil
}

func writeGroups(orchDir string, groups map[int]bool) error {
	var b strings.Builder
	for g := range groups {
		// With the leader's start time, so that a later kill can tell the
		// group from another that reuses the number.
		fmt.Fprintf(&b, "%d %s\n", g, startTime(g))
	}
	// Written whole or not at all: a crash mid-write must not lose the
	// groups already recorded.
	return atomicfile.Write(filepath.Join(orchDir, groupsFile), []byte(b.String()), 0o600)
}

// startTime is a process's start time (field 22 of /proc/<pid>/stat), or ""
// when it is gone.
func startTime(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return ""
	}
	return f[19] // fields after the command start at field 3
}

// KillRecorded kills the gate process groups recorded by this or an
// earlier lead loop.
func KillRecorded(orchDir string) {
	data, err := os.ReadFile(filepath.Join(orchDir, groupsFile))
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		g, err := strconv.Atoi(f[0])
		// Only the very group that was recorded: same leader, same start.
		if err == nil && g > 1 && startTime(g) == f[1] {
			syscall.Kill(-g, syscall.SIGKILL)
		}
	}
	os.Remove(filepath.Join(orchDir, groupsFile))
}
