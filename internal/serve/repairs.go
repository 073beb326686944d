package serve

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"

	"github.com/factory-harness/factory/internal/builder"
	"github.com/factory-harness/factory/internal/planner"
)

// Bounds of what the build page shows of the repairs of its plan: a
// repair's reason is the planner's words (a give-up) or the validator's
// about them, and its ids and files are named after what it replied.
const (
	maxRepairsShown      = 100 // a build makes --max-repairs of them, 2 by default
	maxRepairRecordBytes = 1 << 20
	maxRepairReason      = 4000
	maxRepairIDs         = 200 // listed per kind of change
	maxRepairFiles       = 100
)

// The outcome of a repair whose repair.json is not there (being asked
// for, or cut off: the next process resumes it) or does not decode.
const (
	repairPending    = "pending"
	repairUnreadable = "unreadable"
)

// RepairView is one repair of the build's plan, from its directory
// repairs/<N>/: the outcome repair.json records, strings cut, the diff it
// made, and its recorded files.
type RepairView struct {
	N int `json:"repair"`
	// Outcome is repair.json's (applied, gave_up, rejected), or pending,
	// or unreadable (Error says why).
	Outcome string                `json:"outcome"`
	Record  *builder.RepairRecord `json:"record"`
	Error   string                `json:"error,omitempty"`
	Diff    Text                  `json:"diff"`
	Files   []RepairFile          `json:"files"`
}

// RepairFile is a recorded file of a repair.
type RepairFile struct {
	Label string `json:"label"`
	Name  string `json:"name"` // relative to the out dir, for /files/
}

// repairDir names a repair's directory: a number from 1, as the builder
// writes it.
var repairDir = regexp.MustCompile(`^[1-9][0-9]{0,5}$`)

// repairAttemptFile is a planner reply's file in a repair directory:
// kind, attempt.
var repairAttemptFile = regexp.MustCompile(`^(prompt|llm_raw_response)_attempt_([1-9][0-9]{0,3})\.txt$|^(validation_errors)_attempt_([1-9][0-9]{0,3})\.json$`)

// A repair's files besides its replies', as the page lists them: the
// request before the replies, the outcome after.
var (
	repairFilesBefore = []RepairFile{{"request", "request.json"}, {"plan before", "plan_before.json"}}
	repairFilesAfter  = []RepairFile{{"plan after", "plan_after.json"}, {"diff", "diff.txt"}, {"record", "repair.json"}}
)

// readRepairs reads the repairs of build hash in src, by number. Unlike
// builder.ReadRepairs, which refuses a build with a damaged record, it
// shows every repair directory there is, a damaged one as unreadable.
func (s *Server) readRepairs(src *source, hash string) []RepairView {
	base := "builds/" + hash + "/repairs"
	ents, _ := src.readDir(base)
	var ns []int
	for _, e := range ents {
		if e.IsDir() && repairDir.MatchString(e.Name()) {
			n, _ := strconv.Atoi(e.Name())
			ns = append(ns, n)
		}
	}
	slices.Sort(ns)
	out := []RepairView{}
	for _, n := range ns[:min(len(ns), maxRepairsShown)] {
		dir := base + "/" + strconv.Itoa(n)
		v := RepairView{N: n, Files: repairFiles(src, dir)}
		data, total, err := src.readFile(dir+"/repair.json", maxRepairRecordBytes)
		switch {
		case err != nil && isNotFound(err):
			v.Outcome = repairPending
		case err != nil:
			v.Outcome, v.Error = repairUnreadable, fmt.Sprintf("repair.json could not be read: %v", err)
		case total > maxRepairRecordBytes:
			v.Outcome, v.Error = repairUnreadable, fmt.Sprintf("repair.json is larger than %d MiB: not a record factory wrote", maxRepairRecordBytes>>20)
		default:
			v.Record, v.Error = decodeRepair(n, data)
			v.Outcome = repairUnreadable
			if v.Record != nil {
				v.Outcome = v.Record.Outcome
			}
		}
		if v.Outcome == builder.RepairApplied {
			v.Diff = readText(src, dir+"/diff.txt", s.maxText)
		}
		out = append(out, v)
	}
	return out
}

// decodeRepair decodes repair n's repair.json strictly, its strings cut
// for the page; nil and why when it is not a record factory wrote.
func decodeRepair(n int, data []byte) (*builder.RepairRecord, string) {
	r, err := builder.DecodeRepair(n, data)
	if err != nil {
		return nil, "repair.json is not a record factory wrote: " + cutRunes(err.Error(), 500)
	}
	if !slices.Contains([]string{builder.RepairApplied, builder.RepairGaveUp, builder.RepairRejected}, r.Outcome) {
		return nil, fmt.Sprintf("repair.json's outcome %q is none factory writes", cutRunes(r.Outcome, 100))
	}
	r.Failed, r.Title, r.Stage = cutRunes(r.Failed, 100), cutRunes(r.Title, maxDepsField), cutRunes(r.Stage, 100)
	r.Reason, r.Dir = cutRunes(r.Reason, maxRepairReason), cutRunes(r.Dir, maxDepsField)
	r.Removed, r.Added, r.Revised = cutIDs(r.Removed), cutIDs(r.Added), cutIDs(r.Revised)
	return &r, ""
}

// cutIDs bounds a list of work order ids: maxRepairIDs of them, each cut.
func cutIDs(ids []string) []string {
	out := []string{}
	for _, id := range ids[:min(len(ids), maxRepairIDs)] {
		out = append(out, cutRunes(id, 100))
	}
	if len(ids) > maxRepairIDs {
		out = append(out, fmt.Sprintf("and %d more", len(ids)-maxRepairIDs))
	}
	return out
}

// repairFiles lists the recorded files of the repair in dir (regular
// files of the names the builder and planner write): request and plan
// before, then each reply's prompt, reply and validation errors, then the
// plan after, the diff and the record.
func repairFiles(src *source, dir string) []RepairFile {
	ents, _ := src.readDir(dir)
	have := map[string]bool{}
	type reply struct {
		n    int
		kind string
		name string
	}
	var replies []reply
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		have[e.Name()] = true
		if m := repairAttemptFile.FindStringSubmatch(e.Name()); m != nil {
			kind, num := m[1]+m[3], m[2]+m[4]
			n, _ := strconv.Atoi(num)
			replies = append(replies, reply{n, kind, e.Name()})
		}
	}
	order := map[string]int{"prompt": 0, "llm_raw_response": 1, "validation_errors": 2}
	label := map[string]string{"prompt": "prompt", "llm_raw_response": "reply", "validation_errors": "validation errors"}
	slices.SortFunc(replies, func(a, b reply) int {
		if a.n != b.n {
			return a.n - b.n
		}
		return order[a.kind] - order[b.kind]
	})
	out := []RepairFile{}
	add := func(name, l string) {
		if len(out) < maxRepairFiles {
			out = append(out, RepairFile{Label: l, Name: dir + "/" + name})
		}
	}
	for _, f := range repairFilesBefore {
		if have[f.Name] {
			add(f.Name, f.Label)
		}
	}
	for _, r := range replies {
		add(r.name, fmt.Sprintf("%s %d", label[r.kind], r.n))
	}
	for _, f := range repairFilesAfter {
		if have[f.Name] {
			add(f.Name, f.Label)
		}
	}
	return out
}

// repairedPlan reads the plan of the last applied repair: the build's
// plan since (the builder reads the same file back). Nil when no repair
// was applied or its plan does not decode.
func repairedPlan(src *source, hash string, repairs []RepairView) (*planner.PlanFile, int) {
	for i := len(repairs) - 1; i >= 0; i-- {
		if repairs[i].Outcome != builder.RepairApplied {
			continue
		}
		var p planner.PlanFile
		if src.readJSON(fmt.Sprintf("builds/%s/repairs/%d/plan_after.json", hash, repairs[i].N), &p) != nil {
			return nil, 0
		}
		return &p, repairs[i].N
	}
	return nil, 0
}

// repairedBy says, for each work order a repair changed, which repair
// last did and how: "added by repair 1".
func repairedBy(repairs []RepairView) map[string]string {
	by := map[string]string{}
	for _, r := range repairs {
		if r.Record == nil || r.Outcome != builder.RepairApplied {
			continue
		}
		for _, c := range []struct {
			how string
			ids []string
		}{{"removed", r.Record.Removed}, {"added", r.Record.Added}, {"revised", r.Record.Revised}} {
			for _, id := range c.ids {
				by[id] = fmt.Sprintf("%s by repair %d", c.how, r.N)
			}
		}
	}
	return by
}
