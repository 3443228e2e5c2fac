package runas

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Handing files over. The lead (root) makes a worker's checkout and its
// agent's files; the worker's user must own them to edit them. A chown
// that follows a path is a classic way up: a worker that swaps a folder
// for a symlink, or hard-links a file it may not read, would have root
// chown something else to it. So the walk goes by descriptor (openat with
// O_NOFOLLOW, fchownat without following), a link is chowned as the link,
// and only what the lead itself owns is handed over, never a file with a
// second hard link.

// Give hands path, and everything below it if it is a folder, to u. For
// nil, nothing.
func (u *User) Give(path string) error {
	if u == nil {
		return nil
	}
	if err := unix.Fchownat(unix.AT_FDCWD, path, int(u.UID), int(u.GID), unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("run_as %s: %s: %w", u.Name, path, err)
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == unix.ENOTDIR || err == unix.ELOOP {
		return nil
	}
	if err != nil {
		return fmt.Errorf("run_as %s: %s: %w", u.Name, path, err)
	}
	return u.giveBelow(fd, path, false)
}

// GiveTree hands a checkout to u but for its top: the top folder stays the
// lead's, in u's group with mode 1770 (u may add and remove its own files
// there, the sticky bit keeps it from replacing the lead's), and the .git
// file in it stays the lead's. That file names the checkout's git
// directory; git run by the lead must never read one u made, which is
// also why git (safe.directory) refuses a checkout whose top someone else
// owns. For nil, nothing.
func (u *User) GiveTree(dir string) error {
	if u == nil {
		return nil
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("run_as %s: %s: %w", u.Name, dir, err)
	}
	if err := unix.Fchown(fd, os.Geteuid(), int(u.GID)); err != nil {
		unix.Close(fd)
		return fmt.Errorf("run_as %s: %s: %w", u.Name, dir, err)
	}
	if err := unix.Fchmod(fd, 0o770|unix.S_ISVTX); err != nil {
		unix.Close(fd)
		return fmt.Errorf("run_as %s: %s: %w", u.Name, dir, err)
	}
	return u.giveBelow(fd, dir, true)
}

// giveBelow hands over what is in the open folder fd (closed on return);
// top skips its .git.
func (u *User) giveBelow(fd int, path string, top bool) error {
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("run_as %s: %s: %w", u.Name, path, err)
	}
	lead := uint32(os.Geteuid())
	for _, name := range names {
		if top && name == ".git" {
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("run_as %s: %s/%s: %w", u.Name, path, name, err)
		}
		isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
		if st.Uid == lead && (isDir || st.Nlink <= 1) {
			if err := unix.Fchownat(fd, name, int(u.UID), int(u.GID), unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return fmt.Errorf("run_as %s: %s/%s: %w", u.Name, path, name, err)
			}
		}
		if !isDir {
			continue
		}
		sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == unix.ENOTDIR || err == unix.ELOOP || err == unix.ENOENT {
			continue // swapped for something else meanwhile: not followed
		}
		if err != nil {
			return fmt.Errorf("run_as %s: %s/%s: %w", u.Name, path, name, err)
		}
		if err := u.giveBelow(sub, path+"/"+name, false); err != nil {
			return err
		}
	}
	return nil
}
