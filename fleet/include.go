package fleet

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/orch-dev/orch/git"
)

// Includes reads the committed .worktreeinclude: one path per line,
// relative to the repo root, # comments; paths must stay inside the repo.
// Each is a literal path, never a pattern.
func Includes(ctx context.Context, repo *git.Repo) ([]string, error) {
	data, err := repo.Show(ctx, "HEAD", IncludeFile)
	if err != nil {
		return nil, nil // none committed
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		clean := filepath.Clean(line)
		if filepath.IsAbs(clean) || clean == "." || clean == ".." || strings.HasPrefix(clean, "../") ||
			clean == ".git" || strings.HasPrefix(clean, ".git/") || clean == ".orch" || strings.HasPrefix(clean, ".orch/") {
			return nil, fmt.Errorf("%w: line %d: %q must be a path inside the repo (not .git or .orch)", ErrInclude, n, line)
		}
		out = append(out, filepath.ToSlash(clean))
	}
	return out, nil
}

// CopyIncludes copies the .worktreeinclude files that exist in the repo
// into a worktree (regular files only; a missing one is skipped). Both
// sides go through os.Root: a symlink on the way cannot lead outside.
func CopyIncludes(ctx context.Context, repo *git.Repo, dir string) error {
	list, err := Includes(ctx, repo)
	if err != nil {
		return err
	}
	return copyIncluded(repo.Root, list, dir)
}

// copyIncluded copies the listed files (Includes) from root into dir.
func copyIncluded(root string, list []string, dir string) error {
	if len(list) == 0 {
		return nil
	}
	src, err := os.OpenRoot(root)
	if err != nil {
		return err
	}
	defer src.Close()
	for _, rel := range list {
		name := filepath.FromSlash(rel)
		fi, err := src.Lstat(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInclude, rel, err)
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%w: %s is not a regular file (symlinks and folders are not copied)", ErrInclude, rel)
		}
		data, err := src.ReadFile(name)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInclude, rel, err)
		}
		if err := WriteIn(dir, rel, data, fi.Mode().Perm()); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInclude, rel, err)
		}
	}
	return nil
}

// WriteIn writes rel (slash-separated) under dir, through os.Root: no
// symlink (a worker may commit one) can carry the write outside dir. A
// file that already holds data is left alone; otherwise it is replaced by
// rename, so a reader never sees half of it.
func WriteIn(dir, rel string, data []byte, perm os.FileMode) error {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer r.Close()
	rel = filepath.FromSlash(rel)
	if old, err := r.ReadFile(rel); err == nil && bytes.Equal(old, data) {
		return nil
	}
	if err := r.MkdirAll(filepath.Dir(rel), 0o755); err != nil {
		return err
	}
	tmp := rel + ".orch-tmp"
	if err := r.WriteFile(tmp, data, perm); err != nil {
		return err
	}
	return r.Rename(tmp, rel)
}
