// Package temporal runs factory builds across machines on Temporal: a
// Build workflow that plans once and then runs one WorkOrder activity per
// work order, in order, on whichever worker takes it (with Jobs > 1,
// independent ones at once, integrated in plan order by Integrate
// activities, as a local parallel build does); the worker; and
// submit, follow, status and cancel for the client side. The repository
// travels through git (a remote every worker can reach); each work order
// runs on the worker exactly as in a local build (internal/builder's Step)
// and its commit is pushed with a lease.
//
// Nothing secret enters a workflow's history: model keys, base URLs,
// prices, the sandbox and the Python interpreter are the worker's own.
package temporal

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/factory-harness/factory/internal/builder"
	"github.com/factory-harness/factory/internal/planner"
	"github.com/factory-harness/factory/internal/workorder"
)

// Defaults of the worker and the client.
const (
	DefaultNamespace = "default"
	DefaultTaskQueue = "factory"
	// DefaultHeartbeatTimeout is how long a work order may go without a
	// heartbeat before Temporal gives it to another worker.
	DefaultHeartbeatTimeout = 30 * time.Second
)

// Names registered with Temporal.
const (
	WorkflowName          = "factory.Build"
	PlanActivityName      = "factory.Plan"
	WorkOrderActivityName = "factory.WorkOrder"
	IntegrateActivityName = "factory.Integrate"
	RepairActivityName    = "factory.Repair"
	StateQuery            = "state"
)

// Verdicts beyond the local build's (builder.Verdict*).
const (
	VerdictCanceled = "CANCELED" // factory cancel
	VerdictRunning  = "RUNNING"  // not finished yet (status)
)

// Error types of the activities' and the workflow's application errors;
// the workflow's is the build verdict.
const (
	errTypeFail        = builder.VerdictFail
	errTypePlanInvalid = builder.VerdictPlanInvalid
	errTypeBudget      = builder.VerdictBudget
	errTypeProvider    = "PROVIDER" // a provider error no retry can fix
	errTypeRefused     = "REFUSED"  // the worker cannot run this build (its settings, a moved branch)
)

// BuildInput is the workflow's input: what `factory build --temporal`
// sends. It holds no secret: keys, base URLs, prices, the sandbox and the
// interpreter come from the worker.
type BuildInput struct {
	RepoURL  string `json:"repo_url"`
	Base     string `json:"base"`   // branch of the remote or commit; "" is the remote's HEAD
	Branch   string `json:"branch"` // factory/<plan hash>
	PlanHash string `json:"plan_hash"`
	// Exactly one: the spec's text, or the plan (planner.LoadPlan's JSON).
	Spec string          `json:"spec,omitempty"`
	Plan json.RawMessage `json:"plan,omitempty"`

	Model          string   `json:"model"`      // --llm-model as given
	ModelName      string   `json:"model_name"` // without its provider
	Temperature    float64  `json:"temperature"`
	JSONSchema     bool     `json:"json_schema"`
	MaxAttempts    int      `json:"max_attempts"`
	TimeoutSeconds int      `json:"timeout_seconds"`
	VerifyCommands []string `json:"verify_commands,omitempty"`

	Template        string `json:"template,omitempty"` // the planner's prompt template ("" the built-in one)
	ReasoningEffort string `json:"reasoning_effort"`
	MaxOutputTokens int64  `json:"max_output_tokens"`
	PlanMaxAttempts int    `json:"plan_max_attempts"`
	Review          bool   `json:"review"`
	ReviewModel     string `json:"review_model"`
	// MapTokens is the repository map's budget (builder.Options.MapTokens);
	// 0, also in a workflow started before it existed, shows none.
	MapTokens int `json:"map_tokens,omitempty"`

	// CacheKey is the prompt cache key of every model request of the build
	// (builder.Options.CacheKey): factory eval gives each run its own; ""
	// is the build's own, from its plan hash.
	CacheKey string `json:"cache_key,omitempty"`

	// The budget of the whole workflow; 0 is no limit.
	MaxTokens  int64   `json:"max_tokens"`
	MaxCostUSD float64 `json:"max_cost_usd"`

	HeartbeatTimeout time.Duration `json:"heartbeat_timeout"`

	// Jobs is how many work orders may run at once (--jobs), each on the
	// commit builder.BaseChain gives it, integrated in plan order; 0 or 1,
	// also in a workflow started before it existed, runs them one after
	// the other.
	Jobs int `json:"jobs,omitempty"`

	// Repair asks the planner to repair the plan when a work order ends
	// FAIL, at most MaxRepairs times (builder.Options.Repair); false, also
	// in a workflow started before it existed, stops the build there.
	Repair     bool `json:"repair,omitempty"`
	MaxRepairs int  `json:"max_repairs,omitempty"`
}

// orderRef is where a work order of a parallel build (BuildInput.Jobs > 1)
// that ran from commit start keeps its commit on the remote: a ref outside
// refs/heads, so no branch of the remote changes, that every worker can
// fetch to start the orders depending on it and to integrate it. A run
// from another start (a rerun) gets a ref of its own, so an order that
// started from the earlier commit still finds it.
func orderRef(planHash, id, start string) string { return orderRefs(planHash) + id + "/" + start }

// orderRefs is the prefix of a build's orderRefs.
func orderRefs(planHash string) string { return "refs/factory/" + planHash + "/" }

// WorkflowID is the build's workflow id: the same remote, base, branch
// and plan are the same build, so submitting it again attaches to it.
func WorkflowID(in BuildInput) string {
	sum := sha256.Sum256([]byte(in.RepoURL + "\x00" + in.Base + "\x00" + in.Branch + "\x00" + in.PlanHash))
	return "factory-build-" + in.PlanHash + "-" + hex.EncodeToString(sum[:])[:12]
}

// Spend is what the model calls of a build, a step or an attempt of a
// step cost.
type Spend struct {
	Tokens   int64   `json:"tokens"`
	CostUSD  float64 `json:"cost_usd"`
	Unpriced bool    `json:"unpriced,omitempty"` // some call had no price: the cost is unknown
	// InputTokens is the prompt tokens of Tokens; CachedInputTokens and
	// CacheWriteTokens the parts read from and written to prompt caches.
	InputTokens       int64 `json:"input_tokens,omitempty"`
	CachedInputTokens int64 `json:"cached_input_tokens,omitempty"`
	CacheWriteTokens  int64 `json:"cache_write_tokens,omitempty"`
}

func (s Spend) add(t Spend) Spend {
	return Spend{Tokens: s.Tokens + t.Tokens, CostUSD: s.CostUSD + t.CostUSD, Unpriced: s.Unpriced || t.Unpriced,
		InputTokens: s.InputTokens + t.InputTokens, CachedInputTokens: s.CachedInputTokens + t.CachedInputTokens,
		CacheWriteTokens: s.CacheWriteTokens + t.CacheWriteTokens}
}

// cost is the cost, nil when unknown, as summaries print it.
func (s Spend) cost() *float64 {
	if s.Unpriced {
		return nil
	}
	c := s.CostUSD
	return &c
}

// PlanInput is the Plan activity's input.
type PlanInput struct {
	Build      BuildInput `json:"build"`
	WorkflowID string     `json:"workflow_id"`
	Spent      Spend      `json:"spent"` // by the workflow so far
}

// PlanResult is the Plan activity's result: the plan, which the workflow
// keeps, so a retried or replayed workflow never plans again.
type PlanResult struct {
	Manifest   *workorder.Manifest `json:"manifest"`
	Source     string              `json:"source"`
	Dir        string              `json:"dir"` // on the worker
	BaseCommit string              `json:"base_commit"`
	Worker     string              `json:"worker"`
	Spend      Spend               `json:"spend"`
	Lines      []string            `json:"lines"` // progress
	// For a parallel build (BuildInput.Jobs > 1): the work orders already
	// on the remote's build branch (builder.Passed) and the branch's
	// commit, "" when it does not exist.
	Passed    map[string]string `json:"passed,omitempty"`
	BranchTip string            `json:"branch_tip,omitempty"`
}

// WorkOrderInput is the WorkOrder activity's input.
type WorkOrderInput struct {
	Build      BuildInput          `json:"build"`
	WorkflowID string              `json:"workflow_id"`
	BaseCommit string              `json:"base_commit"`
	Parent     string              `json:"parent"` // the commit this work order builds on
	WorkOrder  workorder.WorkOrder `json:"work_order"`
	Spent      Spend               `json:"spent"` // by the workflow so far
	// CacheLayout is the whole plan's (builder.PlanCacheLayout): the
	// prompt's shared context and the cache retention are the same as in a
	// local build of the plan.
	CacheLayout builder.CacheLayout `json:"cache_layout"`
	// Parallel: the work order runs on Parent with the commits of Chain
	// replayed onto it (builder.BaseChain), and its commit goes to
	// orderRef, not to the branch: the Integrate step puts it there.
	Parallel bool     `json:"parallel,omitempty"`
	Chain    []string `json:"chain,omitempty"`
	// Repair is the repair that last wrote the work order (its commit's
	// Factory-Repair trailer); 0 for none.
	Repair int `json:"repair,omitempty"`
}

// RepairInput is the Repair activity's input: repair number Repair of
// the plan after its order Failed ended FAIL, the branch at Tip.
type RepairInput struct {
	Build      BuildInput             `json:"build"`
	WorkflowID string                 `json:"workflow_id"`
	BaseCommit string                 `json:"base_commit"`
	Tip        string                 `json:"tip"` // the branch's commit on the remote; "" when it does not exist yet
	Plan       *workorder.Manifest    `json:"plan"`
	Failed     planner.FailedOrder    `json:"failed"`
	Earlier    []builder.RepairRecord `json:"earlier"` // the build's repairs so far
	Used       []string               `json:"used"`    // every id the build's plans have held
	Spent      Spend                  `json:"spent"`   // by the workflow so far
}

// RepairResult is how a repair ended: its record and, applied, the
// repaired plan, which the workflow goes on with.
type RepairResult struct {
	Record   builder.RepairRecord `json:"record"`
	Manifest *workorder.Manifest  `json:"manifest,omitempty"`
	Worker   string               `json:"worker"`
	Spend    Spend                `json:"spend"`
	Lines    []string             `json:"lines,omitempty"`
}

// IntegrateInput is the Integrate activity's input: put a parallel
// build's passed work order onto the build branch at Tip.
type IntegrateInput struct {
	Build      BuildInput          `json:"build"`
	WorkflowID string              `json:"workflow_id"`
	BaseCommit string              `json:"base_commit"`
	WorkOrder  workorder.WorkOrder `json:"work_order"`
	Commit     string              `json:"commit"` // the order's, at its orderRef; its parent is where it ran from
	Tip        string              `json:"tip"`    // the branch's commit on the remote; "" when it does not exist yet
}

// IntegrateResult is how an integration ended: the order's commit on
// the branch, or why it must run again from the branch's tip.
type IntegrateResult struct {
	Commit string   `json:"commit,omitempty"`
	Rerun  string   `json:"rerun,omitempty"`
	Worker string   `json:"worker"`
	Lines  []string `json:"lines,omitempty"`
}

// WorkOrderResult is one work order's outcome: the summary line of a
// local build plus where it ran.
type WorkOrderResult struct {
	builder.WorkOrder
	Verdict      string `json:"verdict"` // PASS, FAIL, BUDGET, ERROR, or "" while pending
	Worker       string `json:"worker,omitempty"`
	StoppedEarly string `json:"stopped_early,omitempty"`
	// Reused is set when the commit was already on the remote (an
	// earlier attempt pushed it): no model call was made.
	Reused bool     `json:"reused,omitempty"`
	Spend  Spend    `json:"spend"`
	Lines  []string `json:"lines,omitempty"` // progress, for the workflow's log
	Error  string   `json:"error,omitempty"`
	// Failure is a FAIL's evidence for a repair (builder.FailedOrder):
	// its attempts' failure briefs are on the worker that ran it.
	Failure *planner.FailedOrder `json:"failure,omitempty"`
}

// BuildResult is the workflow's result and what status and --json print.
type BuildResult struct {
	WorkflowID string   `json:"workflow_id"`
	Verdict    string   `json:"verdict"`
	RepoURL    string   `json:"repo_url"`
	PlanHash   string   `json:"plan_hash"`
	PlanSource string   `json:"plan_source,omitempty"`
	PlanDir    string   `json:"plan_dir,omitempty"` // on the planning worker
	PlanWorker string   `json:"plan_worker,omitempty"`
	Branch     string   `json:"branch"`
	BaseCommit string   `json:"base_commit,omitempty"`
	Head       string   `json:"head,omitempty"` // the branch's commit on the remote
	Tokens     int64    `json:"tokens"`
	CostUSD    *float64 `json:"cost_usd"`
	// InputTokens, CachedInputTokens and CacheWriteTokens: as in
	// builder.Summary.
	InputTokens       int64             `json:"input_tokens,omitempty"`
	CachedInputTokens int64             `json:"cached_input_tokens,omitempty"`
	CacheWriteTokens  int64             `json:"cache_write_tokens,omitempty"`
	WorkOrders        []WorkOrderResult `json:"work_orders"`
	Failed            string            `json:"failed,omitempty"`
	Error             string            `json:"error,omitempty"`
	// Repairs are the repairs of the plan (BuildInput.Repair), each
	// recorded on the worker that made it (its dir).
	Repairs []builder.RepairRecord `json:"repairs,omitempty"`
	// Lines are the build's progress lines so far (the state query's);
	// the result itself leaves them out.
	Lines []string `json:"lines,omitempty"`
}
