package serve

import (
	"fmt"
	"net/url"

	"github.com/factory-harness/factory/internal/forge"
)

// PRView is the pull request a build was last published to (its pr.json),
// strings cut: what a forge answered and the remote's URL.
type PRView struct {
	Record *forge.Record `json:"record"`
	// Link is the record's URL when it is an http or https one: the page
	// links to nothing else.
	Link  string `json:"link,omitempty"`
	Error string `json:"error,omitempty"` // why pr.json could not be read
}

// readPR reads the pull request record of build hash; nil when the build
// was never published.
func readPR(src *source, hash string) *PRView {
	data, total, err := src.readFile("builds/"+hash+"/"+forge.RecordFile, forge.MaxRecordBytes)
	switch {
	case err != nil && isNotFound(err):
		return nil
	case err != nil:
		return &PRView{Error: fmt.Sprintf("%s could not be read: %v", forge.RecordFile, err)}
	case total > forge.MaxRecordBytes:
		return &PRView{Error: fmt.Sprintf("%s is larger than %d KiB: not a record factory wrote", forge.RecordFile, forge.MaxRecordBytes>>10)}
	}
	return decodePR(data)
}

// decodePR decodes a pr.json for the page.
func decodePR(data []byte) *PRView {
	r, err := forge.DecodeRecord(data)
	if err != nil {
		return &PRView{Error: cutRunes(err.Error(), 500)}
	}
	v := &PRView{Record: r}
	if u, err := url.Parse(r.URL); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && len(r.URL) <= maxDepsField {
		v.Link = r.URL
	}
	r.Forge, r.State = forge.Kind(cutRunes(string(r.Forge), 100)), forge.State(cutRunes(string(r.State), 100))
	r.Repo, r.URL = cutRunes(r.Repo, maxDepsField), cutRunes(r.URL, maxDepsField)
	r.Head, r.Base = cutRunes(r.Head, maxDepsField), cutRunes(r.Base, maxDepsField)
	r.Commit, r.Action = cutRunes(r.Commit, 100), cutRunes(r.Action, 100)
	return v
}
