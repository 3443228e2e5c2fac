package lead

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/internal/runas"
)

// Workers of their own Unix users (orch.yaml's run_as). The lead stays
// root; each worker's agent, setup, gates and metric commands run as its
// user, which gets its worktree, its agent's files and its own key, may
// write into the spool and search the folders on the way, and nothing
// more: the lead's key, the other workers' keys, state.json and the
// stream stay root's alone.

// workerUsers looks up each worker's user; none without run_as.
func (l *Loop) workerUsers(ids []string) (map[string]*runas.User, error) {
	if len(l.conf.RunAs) == 0 {
		return nil, nil
	}
	if err := runas.Allowed(); err != nil {
		return nil, err
	}
	users := map[string]*runas.User{}
	byName := map[string]*runas.User{}
	for _, id := range ids {
		n, _ := strconv.Atoi(strings.TrimPrefix(id, "w"))
		name, err := l.conf.RunAs.For(n)
		if err != nil {
			return nil, err
		}
		u := byName[name]
		if u == nil {
			if u, err = runas.Lookup(name); err != nil {
				return nil, err
			}
			byName[name] = u
		}
		users[id] = u
	}
	return users, nil
}

// shareWithWorkers sets the folders of .orch/ as the workers' users need
// them (searchable, not listable; the spool writable, sticky), hands each
// its key, and checks, as each user, that it can reach everything it
// needs: a worker that could not would start and never call back. Without
// run_as the folders are the lead's alone again.
func (l *Loop) shareWithWorkers(users map[string]*runas.User) error {
	search, spool := os.FileMode(0o700), os.FileMode(0o700)
	if len(users) > 0 {
		search, spool = 0o711, 0o733|os.ModeSticky
	}
	creds := filepath.Join(l.orchDir, orchdir.Creds)
	for _, d := range []string{l.orchDir, filepath.Join(l.orchDir, orchdir.Worktrees), filepath.Join(l.orchDir, orchdir.Agents),
		filepath.Join(l.orchDir, orchdir.Gates), creds, filepath.Join(creds, orchdir.WorkerKeys)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
		if err := os.Chmod(d, search); err != nil {
			return err
		}
	}
	sp := filepath.Join(l.orchDir, orchdir.Spool)
	if err := os.MkdirAll(sp, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(sp, spool); err != nil {
		return err
	}
	path := os.Getenv("PATH")
	if l.cfg.BinDir != "" {
		path = l.cfg.BinDir + string(os.PathListSeparator) + path
	}
	for _, id := range slices.Sorted(maps.Keys(users)) {
		u := users[id]
		key := orchdir.WorkerKey(l.orchDir, id)
		if err := u.Give(key); err != nil {
			return err
		}
		probes := []runas.Probe{{What: "read", Path: key}, {What: "write", Path: sp}, {What: "write", Path: u.Home},
			{What: "search", Path: filepath.Join(l.orchDir, orchdir.Worktrees)}, {What: "search", Path: filepath.Join(l.orchDir, orchdir.Agents)},
			{What: "search", Path: filepath.Join(l.orchDir, orchdir.Gates)}, {What: "run", Path: l.fleet.NotifyBin()}}
		if prog := l.fleet.Program(id); prog != "" {
			probes = append(probes, runas.Probe{What: "run", Path: prog})
		}
		if err := u.Check(path, probes...); err != nil {
			return fmt.Errorf("worker %s (run_as %s): %w", id, u.Name, err)
		}
		l.log.Info("worker runs as its own user", "worker", id, "user", u.Name, "uid", u.UID)
	}
	return nil
}
