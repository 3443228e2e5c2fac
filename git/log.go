package git

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Commit is one commit as Log reports it.
type Commit struct {
	SHA     string
	Subject string
	Time    time.Time // committer date
}

// Head returns the full sha of HEAD, or ErrNoCommits on an unborn branch.
func (r *Repo) Head(ctx context.Context) (string, error) {
	if sha, found, ok := r.refs.resolve("HEAD"); ok {
		if !found {
			return "", fmt.Errorf("head: %w", ErrNoCommits)
		}
		return sha, nil
	}
	out, err := r.git(ctx, "rev-parse", "--verify", "-q", "HEAD")
	if err != nil {
		if exitCode(err) == 1 {
			return "", fmt.Errorf("head: %w", ErrNoCommits)
		}
		return "", fmt.Errorf("head: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Log returns up to n commits reachable from HEAD, newest first, touching
// paths when any are given. n <= 0 means no limit. An unborn branch has an
// empty log.
func (r *Repo) Log(ctx context.Context, n int, paths ...string) ([]Commit, error) {
	// --ignore-missing makes an unborn HEAD an empty history, not an error.
	args := []string{"log", "--ignore-missing", "--format=%H%x00%ct%x00%s%x1e"}
	if n > 0 {
		args = append(args, "-n", strconv.Itoa(n))
	}
	args = append(args, "HEAD", "--")
	out, err := r.git(ctx, append(args, paths...)...)
	if err != nil {
		return nil, fmt.Errorf("log: %w", err)
	}
	var commits []Commit
	for _, rec := range records(out) {
		f := strings.SplitN(rec, "\x00", 3)
		if len(f) != 3 {
			return nil, fmt.Errorf("log: unexpected output %q", rec)
		}
		secs, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("log: commit %s: bad time %q", f[0], f[1])
		}
		commits = append(commits, Commit{SHA: f[0], Subject: f[2], Time: time.Unix(secs, 0)})
	}
	return commits, nil
}

// FindTrailer returns the sha of the newest commit reachable from HEAD whose
// message carries the trailer "key: value" exactly, or "" when none does.
// It is how the lead loop learns that an event was already handled.
func (r *Repo) FindTrailer(ctx context.Context, key, value string) (string, error) {
	if key == "" || strings.ContainsAny(key, ":,)%\n\t ") || strings.ContainsAny(value, "\n") {
		return "", fmt.Errorf("find trailer %q: %q: invalid key or value", key, value)
	}
	// --grep narrows the search cheaply; it also matches the text in a
	// subject, a body or a longer value, so each candidate's parsed trailers
	// decide.
	out, err := r.git(ctx, "log", "--ignore-missing", "-F", "--grep="+key+": "+value,
		"--format=%H%x00%(trailers:key="+key+",valueonly,unfold)%x1e", "HEAD", "--")
	if err != nil {
		return "", fmt.Errorf("find trailer %s: %s: %w", key, value, err)
	}
	for _, rec := range records(out) {
		sha, vals, _ := strings.Cut(rec, "\x00")
		for _, v := range strings.Split(vals, "\n") {
			if strings.TrimSpace(v) == value {
				return sha, nil
			}
		}
	}
	return "", nil
}

// records splits output written with a %x1e terminator per commit.
func records(out []byte) []string {
	var recs []string
	for _, rec := range strings.Split(string(out), "\x1e") {
		if rec = strings.TrimLeft(rec, "\n"); rec != "" {
			recs = append(recs, rec)
		}
	}
	return recs
}

// Show returns the content of path (repo-relative, slash-separated) as it
// is in commit rev: what was committed, whatever the work tree holds now.
func (r *Repo) Show(ctx context.Context, rev, path string) ([]byte, error) {
	if strings.HasPrefix(rev, "-") || strings.Contains(path, "..") {
		return nil, fmt.Errorf("show %s:%s: bad revision or path", rev, path)
	}
	out, err := r.git(ctx, "show", rev+":"+path)
	if err != nil {
		return nil, fmt.Errorf("show %s:%s: %w", rev, path, err)
	}
	return out, nil
}

// ShowCommitted is Show, with exists false (and no error) when rev has no
// file at path.
func (r *Repo) ShowCommitted(ctx context.Context, rev, path string) (data []byte, exists bool, err error) {
	data, err = r.Show(ctx, rev, path)
	if err == nil {
		return data, true, nil
	}
	out, lerr := r.git(ctx, "ls-tree", "--name-only", rev, "--", path)
	if lerr == nil && len(strings.TrimSpace(string(out))) == 0 {
		return nil, false, nil
	}
	return nil, false, err
}

// RecentTrailers maps each value of trailer key, in the last depth commits
// reachable from HEAD, to the commit that carries it: one git process for
// any number of lookups.
func (r *Repo) RecentTrailers(ctx context.Context, key string, depth int) (map[string]string, error) {
	if key == "" || strings.ContainsAny(key, ":,)%\n\t ") || depth <= 0 {
		return nil, fmt.Errorf("recent trailers %q: invalid key or depth", key)
	}
	out, err := r.git(ctx, "log", "--ignore-missing", "-n", strconv.Itoa(depth),
		"--format=%H%x00%(trailers:key="+key+",valueonly,unfold)%x1e", "HEAD", "--")
	if err != nil {
		return nil, fmt.Errorf("recent trailers %s: %w", key, err)
	}
	found := map[string]string{}
	for _, rec := range records(out) {
		sha, vals, _ := strings.Cut(rec, "\x00")
		for _, v := range strings.Split(vals, "\n") {
			if v = strings.TrimSpace(v); v != "" {
				if _, seen := found[v]; !seen {
					found[v] = sha
				}
			}
		}
	}
	return found, nil
}

// Changed reports which of paths differ from HEAD in the work tree
// (modified, added or untracked): one git process for all of them.
func (r *Repo) Changed(ctx context.Context, paths ...string) (map[string]bool, error) {
	out, err := r.git(ctx, append([]string{"status", "--porcelain=v1", "-z", "--untracked-files=all", "--"}, paths...)...)
	if err != nil {
		return nil, fmt.Errorf("changed: %w", err)
	}
	changed := map[string]bool{}
	for _, rec := range strings.Split(string(out), "\x00") {
		if len(rec) > 3 {
			changed[rec[3:]] = true
		}
	}
	return changed, nil
}

// TrailerCommit is a commit that carries some of the trailers asked of
// History: their values by key, and the files it changed.
type TrailerCommit struct {
	SHA      string
	Time     time.Time
	Trailers map[string][]string
	Files    []string
}

// History returns every commit reachable from HEAD, newest first, that
// carries one of the trailer keys, with the files each changed: one git
// process for the whole history. It is for rare work (rebuilding a lost
// record); the lead loop's own lookups stay within RecentTrailers' depth.
func (r *Repo) History(ctx context.Context, keys ...string) ([]TrailerCommit, error) {
	format := "%x1e%H%x00%ct"
	var grep []string
	for _, k := range keys {
		if k == "" || strings.ContainsAny(k, ":,)%\n\t ") {
			return nil, fmt.Errorf("history: invalid trailer key %q", k)
		}
		format += "%x00%(trailers:key=" + k + ",valueonly,unfold)"
		grep = append(grep, regexp.QuoteMeta(k))
	}
	// Only the branch's own line (--first-parent): a commit brought in by a
	// merge (a worker's, on its plan branch) cannot claim a trailer here.
	// --grep lets git skip every commit without one of the keys, so a long
	// history costs little.
	out, err := r.git(ctx, "log", "--first-parent", "--ignore-missing", "--no-renames", "--name-only", "-E",
		"--grep=^("+strings.Join(grep, "|")+"):", "--format="+format+"%x00", "HEAD", "--")
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	var commits []TrailerCommit
	for _, rec := range records(out) {
		f := strings.Split(rec, "\x00")
		if len(f) != len(keys)+3 {
			continue // a trailer holding a separator byte: not one of orch's
		}
		c := TrailerCommit{SHA: f[0], Trailers: map[string][]string{}}
		if secs, err := strconv.ParseInt(f[1], 10, 64); err == nil {
			c.Time = time.Unix(secs, 0).UTC()
		}
		for i, k := range keys {
			for _, v := range strings.Split(f[2+i], "\n") {
				if v = strings.TrimSpace(v); v != "" {
					c.Trailers[k] = append(c.Trailers[k], v)
				}
			}
		}
		if len(c.Trailers) == 0 {
			continue
		}
		for _, name := range strings.Split(f[len(f)-1], "\n") {
			if name = strings.TrimSpace(name); name != "" {
				c.Files = append(c.Files, name)
			}
		}
		commits = append(commits, c)
	}
	return commits, nil
}
