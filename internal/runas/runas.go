// Package runas runs a worker's processes as a Unix user of its own
// (orch.yaml's run_as), so that an agent cannot read the lead's key or
// another worker's, nor write the lead's record: what the user may touch
// is given to it (its worktree, its agent configuration, its own key, the
// spool to write into) and nothing else. It needs a lead running as root,
// which can change to another user and hand files over; elsewhere run_as
// is refused at the start.
package runas

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// User is a Unix user a worker's processes run as.
type User struct {
	Name     string
	UID, GID uint32
	Groups   []uint32 // its supplementary groups
	Home     string
}

// nameRe is what a Unix user name looks like (useradd's default rule).
var nameRe = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)

// ValidName says whether name looks like a Unix user name.
func ValidName(name string) bool { return nameRe.MatchString(name) }

// Lookup finds the user called name. Root, and the user the lead runs as,
// are refused: a worker run as either has every key.
func Lookup(name string) (*User, error) {
	if !ValidName(name) {
		return nil, fmt.Errorf("%w: %q is not a user name like orch-w1", ErrUser, name)
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v (make it first: useradd --create-home %s)", ErrUser, name, err, name)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("%w: %s has uid %q and gid %q, not numbers", ErrUser, name, u.Uid, u.Gid)
	}
	if uid == 0 || gid == 0 {
		return nil, fmt.Errorf("%w: %s is uid %d gid %d: a worker run in root's user or group reads every key; name a user of its own", ErrUser, name, uid, gid)
	}
	if uid == uint64(os.Geteuid()) {
		return nil, fmt.Errorf("%w: %s is the user orch serve runs as: name another user", ErrUser, name)
	}
	r := &User{Name: name, UID: uint32(uid), GID: uint32(gid), Home: u.HomeDir}
	ids, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: its groups: %v", ErrUser, name, err)
	}
	for _, s := range ids {
		g, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			continue
		}
		if g == 0 {
			return nil, fmt.Errorf("%w: %s is in group 0 (root's): a worker in it may read what only root should; take it out (gpasswd -d %s root)", ErrUser, name, name)
		}
		if uint32(g) != r.GID {
			r.Groups = append(r.Groups, uint32(g))
		}
	}
	if r.Home == "" || !filepath.IsAbs(r.Home) {
		return nil, fmt.Errorf("%w: %s has no home folder (its agent keeps its files there): usermod --home /home/%s --move-home %s", ErrUser, name, name, name)
	}
	return r, nil
}

// Allowed says whether this process may run others as another user: it
// must be root (orch does not use sudo or capabilities on its own).
func Allowed() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: orch serve runs as uid %d; only root can start a worker as another user: run orch serve as root (sudo), or remove run_as from orch.yaml", ErrNotAllowed, os.Geteuid())
	}
	return nil
}

// Credential is what exec needs to start a process as u; nil for nil.
func (u *User) Credential() *syscall.Credential {
	if u == nil {
		return nil
	}
	return &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: u.Groups}
}

// Setpriv is the program a tmux pane's command goes through to become the
// worker's user: the tmux server runs as the lead.
const Setpriv = "setpriv"

// Command is cmdline as a pane runs it for u: through setpriv, which takes
// u's uid, gid and groups and then runs the shell. For nil, cmdline as it
// is.
func (u *User) Command(cmdline string) string {
	if u == nil {
		return cmdline
	}
	return fmt.Sprintf("exec %s --reuid=%d --regid=%d --init-groups -- sh -c %s", Setpriv, u.UID, u.GID, quote(cmdline))
}

// Env sets in env what a process of u's needs beside the worker's own:
// its HOME, USER and LOGNAME, and git's leave to work in checkouts the
// lead owns (dirs, given as safe.directory on git's command-line
// configuration, which a repository cannot override). Nothing for nil.
func (u *User) Env(env map[string]string, dirs ...string) {
	if u == nil {
		return
	}
	env["HOME"], env["USER"], env["LOGNAME"] = u.Home, u.Name, u.Name
	// The lead's TMPDIR may be a folder of its own (root's, 0700); the
	// user's programs need one they can write (Claude Code makes
	// $TMPDIR/claude-<uid> as it starts).
	env["TMPDIR"] = "/tmp"
	n := 0
	for _, d := range dirs {
		if d == "" {
			continue
		}
		env[fmt.Sprintf("GIT_CONFIG_KEY_%d", n)] = "safe.directory"
		env[fmt.Sprintf("GIT_CONFIG_VALUE_%d", n)] = d
		n++
	}
	env["GIT_CONFIG_COUNT"] = strconv.Itoa(n)
}

// Environ is base (KEY=VALUE pairs) with Env's settings for u in place of
// any it had.
func (u *User) Environ(base []string, dirs ...string) []string {
	if u == nil {
		return base
	}
	set := map[string]string{}
	u.Env(set, dirs...)
	out := make([]string, 0, len(base)+len(set))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; ok || strings.HasPrefix(k, "GIT_CONFIG_KEY_") || strings.HasPrefix(k, "GIT_CONFIG_VALUE_") {
			continue
		}
		out = append(out, kv)
	}
	for k, v := range set {
		out = append(out, k+"="+v)
	}
	return out
}

// Probe is one thing a worker's user must be able to do: read, write (in)
// or run (search) Path, or find the program Path on its PATH.
type Probe struct {
	What string // "read", "write", "search" or "run"
	Path string
}

// Check runs one shell as u that tries each probe, with path as its PATH,
// and names the first it failed: the folder in the way when one is.
func (u *User) Check(path string, probes ...Probe) error {
	if u == nil || len(probes) == 0 {
		return nil
	}
	script := `for a; do k=${a%%:*}; p=${a#*:}; case $k in
read) test -r "$p";; write) test -w "$p" && test -x "$p";; search) test -x "$p";; run) command -v "$p" >/dev/null;; *) false;;
esac || { printf '%s\n' "$a"; exit 3; }; done`
	args := []string{"-c", script, "sh"}
	for _, p := range probes {
		args = append(args, p.What+":"+p.Path)
	}
	cmd := exec.Command("/bin/sh", args...)
	cmd.Dir = "/"
	cmd.Env = u.Environ([]string{"PATH=" + path})
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: u.Credential()}
	out, err := cmd.Output()
	if err == nil {
		return nil
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		return fmt.Errorf("%w: a shell as %s did not run: %v", ErrCannot, u.Name, err)
	}
	failed := strings.TrimSpace(string(out))
	what, p, _ := strings.Cut(failed, ":")
	if what == "run" {
		return fmt.Errorf("%w: %s cannot run %s: it is not on its PATH or a folder on the way is closed to it (install the agent where every user can run it)", ErrCannot, u.Name, p)
	}
	if d := closedAbove(p, u); d != "" {
		return fmt.Errorf("%w: %s cannot %s %s: %s is closed to it (chmod o+x %s)", ErrCannot, u.Name, what, p, d, d)
	}
	return fmt.Errorf("%w: %s cannot %s %s", ErrCannot, u.Name, what, p)
}

// closedAbove is the first folder above p that u may not search, if any.
func closedAbove(p string, u *User) string {
	var dirs []string
	for d := filepath.Dir(filepath.Clean(p)); ; d = filepath.Dir(d) {
		dirs = append([]string{d}, dirs...)
		if d == "/" || d == "." {
			break
		}
	}
	for _, d := range dirs {
		var st unix.Stat_t
		if unix.Stat(d, &st) != nil {
			return ""
		}
		m := st.Mode
		switch {
		case st.Uid == u.UID:
			if m&0o100 == 0 {
				return d
			}
		case st.Gid == u.GID || slices.Contains(u.Groups, st.Gid):
			if m&0o010 == 0 {
				return d
			}
		case m&0o001 == 0:
			return d
		}
	}
	return ""
}

// quote is s in single quotes for sh.
func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
