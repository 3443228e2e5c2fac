package git

import (
	"bufio"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Reading HEAD and branch refs from the git directory, without a git
// process: the lead asks for the base branch's head and whether a plan's
// branch exists at every dispatch, and a process costs a millisecond or
// two where a file read costs microseconds.
//
// Only the files ref store is read, in its documented layout
// (gitrepository-layout(5)): HEAD, loose refs under refs/heads/, and
// packed-refs. Whatever else turns up (a reftable store, a symref out of
// refs/heads/, a file that is not a hash, a read error) makes the reader
// say it cannot tell, and git is asked as before. A ref is read the way
// git writes it, whole (git renames a new file into place), so a reader
// never sees half of one.

// refFiles is where a repository's refs are read from; "" disables the
// read (git is asked).
type refFiles struct {
	gitDir    string // holds HEAD (the main worktree's: .git)
	commonDir string // holds refs/ and packed-refs
}

// refsAt returns the ref files of a main worktree whose .git directory is
// dir, or none if the store is not the files one.
func refsAt(dir string) refFiles {
	if fi, err := os.Stat(filepath.Join(dir, "HEAD")); err != nil || !fi.Mode().IsRegular() {
		return refFiles{}
	}
	if _, err := os.Lstat(filepath.Join(dir, "reftable")); !errors.Is(err, fs.ErrNotExist) {
		return refFiles{}
	}
	return refFiles{gitDir: dir, commonDir: dir}
}

// resolve returns the hash name (HEAD or refs/heads/...) points at.
// found is false when the ref does not exist (HEAD on an unborn branch);
// ok is false when the files cannot tell: ask git.
func (rf refFiles) resolve(name string) (sha string, found, ok bool) {
	for range 5 { // symref chains are short; a longer one goes to git
		dir := rf.commonDir
		if name == "HEAD" {
			dir = rf.gitDir
		} else if !strings.HasPrefix(name, "refs/heads/") || !validRefName(name) {
			return "", false, false
		}
		if dir == "" {
			return "", false, false
		}
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		switch {
		case errors.Is(err, fs.ErrNotExist) && name != "HEAD":
			return rf.packed(name)
		case err != nil:
			return "", false, false
		}
		s := strings.TrimSpace(string(data))
		if target, sym := strings.CutPrefix(s, "ref: "); sym {
			name = target
			continue
		}
		if !isHash(s) {
			return "", false, false
		}
		return s, true, true
	}
	return "", false, false
}

// packed looks name up in packed-refs.
func (rf refFiles) packed(name string) (sha string, found, ok bool) {
	data, err := os.ReadFile(filepath.Join(rf.commonDir, "packed-refs"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, true
	} else if err != nil {
		return "", false, false
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' || line[0] == '^' { // header, peeled tag
			continue
		}
		h, ref, cut := strings.Cut(line, " ")
		if !cut || !isHash(h) {
			return "", false, false
		}
		if ref == name {
			return h, true, true
		}
	}
	if sc.Err() != nil {
		return "", false, false
	}
	return "", false, true
}

// isHash reports whether s is a full SHA-1 or SHA-256 object name.
func isHash(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// headBranch returns the branch HEAD is on, "" when it is detached; ok
// is false when the files cannot tell.
func (rf refFiles) headBranch() (branch string, ok bool) {
	if rf.gitDir == "" {
		return "", false
	}
	data, err := os.ReadFile(filepath.Join(rf.gitDir, "HEAD"))
	if err != nil {
		return "", false
	}
	s := strings.TrimSpace(string(data))
	if target, sym := strings.CutPrefix(s, "ref: "); sym {
		b, heads := strings.CutPrefix(target, "refs/heads/")
		if !heads || !validRefName(target) {
			return "", false
		}
		return b, true
	}
	return "", isHash(s)
}
