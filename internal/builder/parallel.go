package builder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/factory-harness/factory/internal/factory"
	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/llm"
	"github.com/factory-harness/factory/internal/workorder"
)

// A parallel build (Options.Jobs > 1) runs each pending work order in a
// linked worktree of its own, under <common git dir>/factory/worktrees/
// <plan hash>/<WO-id>, as soon as its dependencies have passed, started
// from a commit that holds them (BaseChain), exactly as a serial build
// runs it there —
// the same confinement, with that worktree as the sandbox's work tree,
// rollback, retries and journal (in the worktree's git directory). A
// passed order's commit goes onto the build branch in plan order only
// (NextIntegration): as it is when nothing else was integrated since its
// base, else replayed onto the branch as a tree operation (its files are
// disjoint from those of the orders it does not depend on) and rechecked
// there — global verification and its acceptance commands — and run
// again from the branch's tip if the recheck fails. The build branch's
// first-parent history is then the serial build's, with the same trees.
// Meanwhile the main work tree stays detached at the commit the build
// started from, and checks out the branch at the end.

// orderDone is what a work order's goroutine reports.
type orderDone struct {
	j     int
	line  WorkOrder
	usage llm.Usage // without a Meter
	err   error
	wt    *gitws.Repo
	base  string
	// chain are the commits of its dependencies it started from (see
	// BaseChain), nil for an order run again from the branch's tip.
	chain  []string
	commit string // in the worktree, on PASS
	// stoppedEarly is why its attempts stopped early, if they did.
	stoppedEarly string
}

// integrated is what an integration reports.
type integrated struct {
	j      int
	commit string // on the branch
	rerun  string // why the order runs again from the tip: its recheck failed, or it is stale
	err    error
}

// parallel is the state of a parallel build, owned by runParallel's loop.
type parallel struct {
	deps     [][]int
	st       []OrderState
	commits  []string // on the branch, integrated orders
	done     []orderDone
	tip      string // of the build branch
	stopping bool
	err      error // the first error that is not a FAIL, in plan order
	errAt    int
}

// latest is order i's latest commit: in its worktree, or on the branch
// for an order integrated by an earlier process.
func (p *parallel) latest(i int) string {
	if c := p.done[i].commit; c != "" {
		return c
	}
	return p.commits[i]
}

// chainCommits are the commits order j starts from (BaseChain).
func (p *parallel) chainCommits(j int) []string {
	var cs []string
	for _, i := range BaseChain(p.deps, j) {
		cs = append(cs, p.latest(i))
	}
	return cs
}

// stale reports whether a dependency of passed order j has run again
// since j started from its commit: j saw a tree the serial build never
// shows it, and runs again too.
func (p *parallel) stale(j int) bool {
	d := p.done[j]
	return d.chain != nil && !slices.Equal(d.chain, p.chainCommits(j))
}

func (b *builder) worktreeDir(id string) string {
	return filepath.Join(b.repo.WorktreesDir(b.sum.PlanHash), id)
}

// runParallel runs the plan's pending orders, at most Jobs at a time, and
// integrates them in plan order; passed maps the orders committed earlier
// to their commits.
func (b *builder) runParallel(ctx context.Context, deps [][]int, passed map[string]string) error {
	n := len(b.plan.WorkOrders)
	p := &parallel{deps: deps, st: make([]OrderState, n), commits: make([]string, n), done: make([]orderDone, n), errAt: n}
	for j, wo := range b.plan.WorkOrders {
		if c, ok := passed[wo.ID]; ok {
			p.st[j], p.commits[j] = StateIntegrated, c
		}
	}
	var err error
	if p.tip, err = b.repo.Head(ctx); err != nil {
		return err
	}
	start := p.tip
	if err := b.repo.DuringGitStep(gitws.GitStep{Step: "detach for a parallel build"}, func() error { return b.repo.DetachHead(ctx) }); err != nil {
		return err
	}
	b.event(map[string]any{"event": "parallel", "jobs": b.o.Jobs, "depends_on": b.dependsOn(deps)})
	b.progress("build: up to %d work orders at a time, each in a worktree under %s", b.o.Jobs, b.repo.WorktreesDir(b.sum.PlanHash))
	events := make(chan any)
	var wg sync.WaitGroup
	defer wg.Wait()
	integrating := false
	// git worktree add, remove and prune must not run at once: a prune
	// can take the records of a worktree being added for stale ones.
	b.worktrees = &sync.Mutex{}
	for {
		if !integrating {
			if j := NextIntegration(p.deps, p.st, p.stopping); j >= 0 {
				p.st[j], integrating = StateIntegrating, true
				c, d, tip, stale := b.orderBuilder(j), p.done[j], p.tip, p.stale(j)
				wg.Go(func() { events <- c.integrate(ctx, d, tip, stale) })
			}
		}
		for _, j := range ToStart(p.deps, p.st, b.o.Jobs, p.stopping) {
			p.st[j] = StateRunning
			c, chain := b.orderBuilder(j), p.chainCommits(j)
			wg.Go(func() { events <- c.runInWorktree(ctx, j, chain, "") })
		}
		if !slices.ContainsFunc(p.st, func(s OrderState) bool { return s == StateRunning || s == StateIntegrating }) {
			break
		}
		switch ev := (<-events).(type) {
		case orderDone:
			b.usage = b.usage.Add(ev.usage)
			b.orderDone(ctx, p, ev)
		case integrated:
			integrating = false
			if b.integrationDone(ctx, p, ev) {
				c, j, tip := b.orderBuilder(ev.j), ev.j, p.tip
				wg.Go(func() { events <- c.runInWorktree(ctx, j, nil, tip) })
			}
		}
	}
	return b.finishParallel(ctx, p, start)
}

// orderDone records a work order's end.
func (b *builder) orderDone(ctx context.Context, p *parallel, ev orderDone) {
	p.done[ev.j] = ev
	b.sum.WorkOrders[ev.j] = ev.line
	if ev.stoppedEarly != "" {
		b.sum.StoppedEarly = ev.stoppedEarly
	}
	if ev.err == nil {
		p.st[ev.j] = StatePassed
		return
	}
	p.st[ev.j], p.stopping = StateFailed, true
	Block(p.deps, p.st, ev.j)
	if !errors.Is(ev.err, errWorkOrderFailed) && ev.j < p.errAt {
		p.err, p.errAt = ev.err, ev.j
	}
	if ev.wt != nil {
		b.removeWorktree(ctx, ev.wt.Root)
	}
}

// integrationDone records an integration's end: the order is on the
// branch, or the build stops, or (rerun) the order must run again from
// the branch's tip, as a serial build would have run it.
func (b *builder) integrationDone(ctx context.Context, p *parallel, ev integrated) (rerun bool) {
	j, id := ev.j, b.plan.WorkOrders[ev.j].ID
	switch {
	case ev.err != nil:
		p.st[j], p.stopping = StateFailed, true
		b.sum.WorkOrders[j].Outcome, b.sum.WorkOrders[j].Commit = OutcomeFailed, ""
		if j < p.errAt {
			p.err, p.errAt = ev.err, j
		}
	case ev.rerun != "":
		p.st[j] = StateRunning
		b.progress("%s: %s; running it again from the branch's tip %s", id, ev.rerun, gitws.ShortHash(p.tip))
		b.event(map[string]any{"event": "rerun_in_series", "wo": id, "base": p.tip, "reason": ev.rerun})
		return true
	default:
		p.st[j], p.commits[j], p.tip = StateIntegrated, ev.commit, ev.commit
		b.sum.WorkOrders[j].Commit = ev.commit
	}
	if wt := p.done[j].wt; wt != nil {
		b.removeWorktree(ctx, wt.Root)
	}
	return false
}

// orderBuilder is the builder that runs or integrates order j in a
// goroutine of its own: a copy of b, taken by runParallel's loop (b's only
// writer), with a summary and spending of its own.
func (b *builder) orderBuilder(j int) *builder {
	c := *b
	c.usage, c.sum.StoppedEarly = llm.Usage{}, ""
	c.sum.WorkOrders = make([]WorkOrder, len(b.plan.WorkOrders))
	c.sum.WorkOrders[j] = b.sum.WorkOrders[j]
	if b.o.Meter != nil {
		c.own = llm.NewMeter(b.o.Run.Model, b.o.Meter.Prices(), llm.Budget{})
		c.o.Run.Model = c.own
	}
	return &c
}

// runInWorktree runs order j in a fresh worktree, as runOne runs an order
// in the main work tree, and reports how it ended. It starts from the
// build's base with the commits of chain applied (BaseChain), or, run
// again, from the branch's tip. b is the order's (orderBuilder).
func (b *builder) runInWorktree(ctx context.Context, j int, chain []string, tip string) orderDone {
	wo := b.plan.WorkOrders[j]
	d := orderDone{j: j, base: tip, chain: chain, line: WorkOrder{ID: wo.ID, Title: wo.Title, Outcome: OutcomePending}}
	var err error
	if tip == "" {
		d.base = b.base
		for _, c := range chain {
			if d.base, err = b.repo.Replay(ctx, c, d.base); err != nil {
				d.line.Outcome, d.err = OutcomeFailed, fmt.Errorf("the base of %s: %w", wo.ID, err)
				return d
			}
		}
	}
	b.worktrees.Lock()
	wt, err := b.repo.AddWorktree(ctx, b.worktreeDir(wo.ID), d.base)
	b.worktrees.Unlock()
	if err != nil {
		d.line.Outcome, d.err = OutcomeFailed, err
		return d
	}
	d.wt = wt
	b.event(map[string]any{"event": "worktree", "wo": wo.ID, "dir": wt.Root, "base": d.base, "rerun": tip != ""})
	b.repo, b.clean, b.sum.WorkOrders[j] = wt, true, d.line
	d.err = b.runOne(ctx, j)
	d.line, d.usage, d.commit, d.stoppedEarly = b.sum.WorkOrders[j], b.usage, b.sum.WorkOrders[j].Commit, b.sum.StoppedEarly
	return d
}

// integrate puts the passed order d.j onto the build branch at tip: its
// own commit when it ran from tip, else its change replayed onto tip and
// rechecked there. A stale order (parallel.stale) runs again instead. b
// is the order's (orderBuilder).
func (b *builder) integrate(ctx context.Context, d orderDone, tip string, stale bool) integrated {
	wo := b.plan.WorkOrders[d.j]
	res := integrated{j: d.j, commit: d.commit}
	if stale {
		res.rerun = "a work order it depends on ran again since it started"
		return res
	}
	if d.base != tip {
		var err error
		if res.commit, err = b.repo.Replay(ctx, d.commit, tip); err != nil {
			res.err = fmt.Errorf("integrate %s: %w", wo.ID, err)
			return res
		}
		stage, err := b.recheck(ctx, d.wt, wo, res.commit)
		if err != nil {
			res.err = fmt.Errorf("recheck %s on the build branch: %w", wo.ID, err)
			return res
		}
		b.event(map[string]any{"event": "recheck", "wo": wo.ID, "commit": res.commit, "stage": stage})
		if stage != "" {
			res.rerun = "its checks fail (" + stage + ") on the branch with the earlier work orders"
			return res
		}
	}
	res.err = b.repo.DuringGitStep(gitws.GitStep{Step: "integrate " + wo.ID, Branch: b.sum.Branch}, func() error {
		return b.repo.MoveBranch(ctx, b.sum.Branch, res.commit, tip, "factory: integrate "+wo.ID)
	})
	if res.err == nil {
		b.progress("%s: integrated as %s", wo.ID, gitws.ShortHash(res.commit))
		b.event(map[string]any{"event": "integrate", "wo": wo.ID, "commit": res.commit, "replayed": d.base != tip})
	}
	return res
}

// recheck checks out commit in the work tree wt and runs wo's checks
// there (factory.Run.Recheck); stage is "" when they pass.
func (b *builder) recheck(ctx context.Context, wt *gitws.Repo, wo workorder.WorkOrder, commit string) (string, error) {
	if err := wt.DuringGitStep(gitws.GitStep{Step: "check out " + gitws.ShortHash(commit)}, func() error {
		return wt.CheckoutDetached(ctx, commit)
	}); err != nil {
		return "", err
	}
	opts := b.o.Run
	opts.Repo, opts.WorkOrder, opts.Out, opts.Tool = wt.Root, &wo, filepath.Join(b.sum.BuildDir, wo.ID), Tool
	opts.Clean, opts.OnEvent = true, func(ev factory.Event) { b.onEvent(wo.ID, ev) }
	if b.o.Progress != nil {
		opts.Progress = indented{b.o.Progress}
	}
	run, err := factory.Preflight(ctx, opts)
	if err != nil {
		return "", err
	}
	return run.Recheck(ctx)
}

// removeWorktree removes a worktree the build is done with; a failure
// is reported, and the next build removes it.
func (b *builder) removeWorktree(ctx context.Context, dir string) {
	b.worktrees.Lock()
	defer b.worktrees.Unlock()
	if err := b.repo.RemoveWorktree(context.WithoutCancel(ctx), dir); err != nil {
		b.progress("build: warning: %v (the next build removes it)", err)
	}
}

// finishParallel removes what is left of the worktrees, checks the build
// branch out in the main work tree again and sets the verdict.
func (b *builder) finishParallel(ctx context.Context, p *parallel, start string) error {
	ctx = context.WithoutCancel(ctx)
	for j, d := range p.done {
		if p.st[j] == StatePassed { // not integrated: an integration failed
			b.sum.WorkOrders[j].Outcome, b.sum.WorkOrders[j].Commit = OutcomePending, ""
		}
		if d.wt != nil && p.st[j] != StateIntegrated && p.st[j] != StateFailed {
			b.removeWorktree(ctx, d.wt.Root)
		}
	}
	b.repo.RemoveWorktreesDir()
	if err := b.attachBranch(ctx, start, p.tip); err != nil {
		return errors.Join(p.err, err)
	}
	failed := slices.Index(p.st, StateFailed)
	switch {
	case p.err != nil:
		return p.err
	case failed >= 0:
		b.sum.Failed = b.plan.WorkOrders[failed].ID
		return errWorkOrderFailed
	}
	return nil
}

// attachBranch checks the build branch out in the main work tree, which
// stayed detached at start while the branch moved on to tip. The
// checkout runs under a journal of the main work tree: a build killed in
// the middle leaves it, and the next build restores start first.
func (b *builder) attachBranch(ctx context.Context, start, tip string) error {
	baseline, err := b.repo.Snapshot(ctx)
	if err != nil {
		return err
	}
	if tip != start {
		if err := factory.WriteJournal(b.repo, Tool, baseline); err != nil {
			return err
		}
	}
	if err := b.repo.DuringGitStep(gitws.GitStep{Step: gitws.StepSwitch, Branch: b.sum.Branch, Target: tip}, func() error {
		return b.repo.SwitchBranch(ctx, b.sum.Branch, "")
	}); err != nil {
		return err
	}
	return b.repo.RemoveJournal()
}

// dependsOn names each order's dependencies, for events and status.
func (b *builder) dependsOn(deps [][]int) map[string][]string {
	out := map[string][]string{}
	for j, ds := range deps {
		ids := []string{}
		for _, i := range ds {
			ids = append(ids, b.plan.WorkOrders[i].ID)
		}
		out[b.plan.WorkOrders[j].ID] = ids
	}
	return out
}

// RecoverWorktrees undoes what a parallel build killed in the middle left
// in repo's worktrees (gitws.Repo.Worktrees): in each, the command still
// running is killed and the attempt rolled back from its journal, as in
// the main work tree; then the worktree is removed, and so is the scratch
// of a replay cut short. The caller holds the repository lock.
func RecoverWorktrees(ctx context.Context, repo *gitws.Repo, progress io.Writer) error {
	if err := repo.RemoveScratch(); err != nil {
		return err
	}
	dirs, err := repo.Worktrees()
	if err != nil {
		return err
	}
	for _, dir := range dirs {
		if progress != nil {
			fmt.Fprintf(progress, "build: removing the worktree %s a parallel build left\n", dir)
		}
		if wt, err := gitws.Open(ctx, dir); err == nil {
			if _, found, _ := factory.JournalTool(wt); found {
				_, _ = wt.RecoverGitLocks(true, time.Now())
				if _, err := factory.RecoverHeld(ctx, wt, progress); err != nil && progress != nil {
					// The worktree goes anyway; only the command had to die.
					fmt.Fprintf(progress, "build: note: restoring %s before its removal: %v\n", dir, err)
				}
			}
		}
		if err := repo.RemoveWorktree(ctx, dir); err != nil {
			return fmt.Errorf("remove the worktree %s a parallel build left: %w", dir, err)
		}
	}
	if len(dirs) > 0 {
		repo.RemoveWorktreesDir()
	}
	return nil
}
