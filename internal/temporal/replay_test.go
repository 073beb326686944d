package temporal

import (
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Histories of builds whose work order failed, serial and -j 2, made by
// the factory before repairs existed (exported with temporal workflow
// show): their input holds no repair settings, so the workflow replays
// them as they ran, without a Repair activity.
func TestReplayHistoriesBeforeRepairs(t *testing.T) {
	for _, name := range []string{"history_fail_serial_before_repairs.json", "history_fail_parallel_before_repairs.json"} {
		t.Run(name, func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflowWithOptions(Build, workflow.RegisterOptions{Name: WorkflowName})
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, filepath.Join("testdata", name)); err != nil {
				t.Errorf("replay: %v", err)
			}
		})
	}
}
