package builder

import (
	"context"
	"time"

	"github.com/factory-harness/factory/internal/repomap"
	"github.com/factory-harness/factory/internal/repomap/gitsrc"
	"github.com/factory-harness/factory/internal/workorder"
)

// repoMap maps commit rev and renders it for focus within the build's
// budget; "" when the budget is 0.
func (b *builder) repoMap(ctx context.Context, rev string, focus func(*repomap.Map) repomap.Focus) (string, error) {
	if b.o.MapTokens <= 0 {
		return "", nil
	}
	start := time.Now()
	m, err := gitsrc.Build(ctx, b.repo, rev)
	if err != nil {
		return "", err
	}
	v := m.Render(focus(m), b.o.MapTokens)
	b.progress("map: %d of %d definitions in %d source files (%d parsed, %d from the cache) in %.2fs",
		v.Shown, v.Total, len(m.Files), m.Parsed, m.Cached, time.Since(start).Seconds())
	return v.Text, nil
}

// WorkOrderFocus is what the map slice of a work order's SE prompt is
// ranked for: its allowed and context files and the identifiers its intent
// and notes name; its context files, shown in full, are left out.
func WorkOrderFocus(m *repomap.Map, wo *workorder.WorkOrder) repomap.Focus {
	text := wo.Title + "\n" + wo.Intent
	if wo.Notes != nil {
		text += "\n" + *wo.Notes
	}
	return m.FocusOn(append(append([]string(nil), wo.AllowedFiles...), wo.ContextFiles...), text, wo.ContextFiles)
}
