package lead

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/internal/rebuild"
	"github.com/orch-dev/orch/internal/state"
)

// loadState reads the loop's record. The rule needs no prompt: a missing
// state.json is rebuilt from git (the ledger, the harvest and integrate
// trailers) whenever git holds anything to rebuild from, since every plan
// would otherwise read as a draft; an unreadable one is refused, naming
// orch serve --rebuild, which moves it aside and rebuilds.
func (l *Loop) loadState(ctx context.Context) (*state.State, error) {
	path := filepath.Join(l.orchDir, orchdir.State)
	_, statErr := os.Lstat(path)
	missing := errors.Is(statErr, os.ErrNotExist)
	if !missing {
		st, err := state.Load(l.orchDir)
		if err == nil && l.cfg.Rebuild {
			// A readable record holds what git does not (queued and running
			// plans, callbacks not yet in the stream, verification rounds):
			// it is never thrown away on a flag alone.
			return nil, fmt.Errorf("%w: state.json is readable; --rebuild is for one that is not (to rebuild anyway, move .orch/state.json aside yourself)", ErrRebuildReadable)
		}
		if err != nil && !l.cfg.Rebuild {
			return nil, fmt.Errorf("%w (to make it again from git, moving this one aside: orch serve --rebuild)", err)
		}
		if err == nil {
			return st, nil
		}
	}
	now := l.cfg.Now().UTC()
	st, rep, err := rebuild.Rebuild(ctx, l.cfg.Root, l.repo, now)
	if err != nil {
		return nil, err
	}
	why := "state.json was missing"
	if !missing {
		why = "orch serve --rebuild"
	}
	if missing && rep.Empty() {
		return st, nil // a new repo: nothing was lost
	}
	st.Rebuilt = &state.Rebuilt{Time: now, Why: why, Summary: rep.String()}
	if !missing {
		kept := fmt.Sprintf("%s.before-rebuild-%d", path, now.UnixNano())
		if err := os.Rename(path, kept); err != nil {
			return nil, fmt.Errorf("rebuild: keep the old record: %w", err)
		}
		st.Rebuilt.Kept = kept
	}
	if err := st.Save(l.orchDir); err != nil {
		return nil, fmt.Errorf("rebuild: %w", err)
	}
	l.log.Warn("record rebuilt from git", "why", why, "found", rep.String(), "kept", st.Rebuilt.Kept)
	return st, nil
}
