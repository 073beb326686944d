package forgetest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// GitLab is a scripted GitLab API v4 on 127.0.0.1: the endpoints forge's
// client uses (projects by id or URL-escaped path, merge requests by iid,
// issues, notes with system and diff notes, users, members) over state
// kept in memory. Its answers carry GitLab's field names. Every request
// needs "PRIVATE-TOKEN: TOKEN" (or "Authorization: Bearer TOKEN"); others
// get 401. API is URL+"/api/v4".
type GitLab struct {
	URL   string
	API   string
	Token string
	// PageSize bounds every list's page (default 2), whatever per_page
	// asks, so that clients follow pages.
	PageSize int
	// NoLink leaves the Link header out of lists: only X-Next-Page and
	// the other X- headers say where the next page is.
	NoLink bool
	// Branch, when set, says whether a branch exists and its commit; a
	// merge request from or to a branch it refuses gets 422. Nil: every
	// branch exists, with a made-up commit.
	Branch func(project, branch string) (sha string, ok bool)

	srv      *httptest.Server
	s        script
	projects map[string]*gitlabProject // by lower-case full path
	users    map[string]*gitlabUser    // by username
}

// GitLabMR is a merge request as the scripted GitLab holds it.
type GitLabMR struct {
	Project     string // full path
	IID         int
	ID          int64
	Title       string
	Description string
	Source      string // branch
	Target      string // branch
	SHA         string
	State       string // opened, closed, merged, locked
	Author      string
	Created     time.Time
	// SourceProjectID is the project the source branch is in: 0 is the
	// project itself, another number a fork.
	SourceProjectID int64
}

// GitLabNote is a note on an issue or (MR) a merge request: a comment, a
// system note, or (Path set) a diff note on a line.
type GitLabNote struct {
	ID      int64
	IID     int
	MR      bool
	Author  string
	Body    string
	System  bool
	Path    string
	Line    int
	Created time.Time
}

type gitlabProject struct {
	id            int64
	path          string
	defaultBranch string
	mrIID         int
	issueIID      int
	mrs           map[int]*GitLabMR
	issues        map[int]*gitlabIssue
	notes         []*GitLabNote
}

type gitlabIssue struct {
	id                 int64
	iid                int
	title, description string
	author, state      string
	created            time.Time
}

type gitlabUser struct {
	id       int64
	username string
	bot      bool
	access   int // in every project; 0 not a member
}

// NewGitLab starts a scripted GitLab that takes token; it stops when t
// ends.
func NewGitLab(t testing.TB, token string) *GitLab {
	g := &GitLab{Token: token, PageSize: 2, projects: map[string]*gitlabProject{}, users: map[string]*gitlabUser{}}
	g.srv = httptest.NewServer(http.HandlerFunc(g.serve))
	g.URL = g.srv.URL
	g.API = g.URL + "/api/v4"
	t.Cleanup(g.srv.Close)
	return g
}

// Client is an http.Client for the server.
func (g *GitLab) Client() *http.Client { return g.srv.Client() }

// Requests returns the requests received so far, in order.
func (g *GitLab) Requests() []Request { return g.s.requests() }

// FailNext makes the next request fail with status and header, with
// GitLab's body for that status (429: its plain "Retry later").
func (g *GitLab) FailNext(status int, header http.Header) {
	g.s.fail(Failure{Status: status, Header: header})
}

// Fail queues f: the next request it matches fails.
func (g *GitLab) Fail(f Failure) { g.s.fail(f) }

// AddProject adds a project at its full path (GROUP/…/NAME) with its
// default branch, and returns its id.
func (g *GitLab) AddProject(path, defaultBranch string) int64 {
	g.s.mu.Lock()
	defer g.s.mu.Unlock()
	id, _ := g.s.next()
	g.projects[strings.ToLower(path)] = &gitlabProject{id: id, path: path, defaultBranch: defaultBranch,
		mrs: map[int]*GitLabMR{}, issues: map[int]*gitlabIssue{}}
	return id
}

// AddUser makes username known; bot is what /users says of it (GitLab's
// notes do not say: a bot is known there by its name, project_7_bot_…).
func (g *GitLab) AddUser(username string, bot bool) {
	g.s.mu.Lock()
	defer g.s.mu.Unlock()
	g.userLocked(username).bot = bot
}

// SetAccess makes username a member of every project at access level
// (10 guest, 20 reporter, 30 developer, 40 maintainer, 50 owner; 0: not a
// member).
func (g *GitLab) SetAccess(username string, level int) {
	g.s.mu.Lock()
	defer g.s.mu.Unlock()
	g.userLocked(username).access = level
}

func (g *GitLab) userLocked(username string) *gitlabUser {
	u := g.users[username]
	if u == nil {
		id, _ := g.s.next()
		u = &gitlabUser{id: id, username: username}
		g.users[username] = u
	}
	return u
}

func (g *GitLab) projectLocked(path string) *gitlabProject {
	p := g.projects[strings.ToLower(path)]
	if p == nil {
		panic("forgetest: no project " + path + "; AddProject first")
	}
	return p
}

// AddIssue opens an issue in project and returns its iid.
func (g *GitLab) AddIssue(project, author, title, description string) int {
	g.s.mu.Lock()
	defer g.s.mu.Unlock()
	p := g.projectLocked(project)
	g.userLocked(author)
	p.issueIID++
	id, at := g.s.next()
	p.issues[p.issueIID] = &gitlabIssue{id: id, iid: p.issueIID, title: title, description: description, author: author, state: "opened", created: at}
	return p.issueIID
}

// AddMR adds a merge request as it is given (IID, ID and Created filled
// in) and returns its iid.
func (g *GitLab) AddMR(m GitLabMR) int {
	g.s.mu.Lock()
	defer g.s.mu.Unlock()
	p := g.projectLocked(m.Project)
	g.userLocked(m.Author)
	p.mrIID++
	m.IID = p.mrIID
	m.ID, m.Created = g.s.next()
	if m.State == "" {
		m.State = "opened"
	}
	if m.SHA == "" {
		m.SHA = fmt.Sprintf("%040x", m.ID)
	}
	p.mrs[m.IID] = &m
	return m.IID
}

// SetMRState sets a merge request's state: opened, closed, merged, locked.
func (g *GitLab) SetMRState(project string, iid int, state string) {
	g.s.mu.Lock()
	defer g.s.mu.Unlock()
	m := g.projectLocked(project).mrs[iid]
	if m == nil {
		panic(fmt.Sprintf("forgetest: no merge request %s!%d", project, iid))
	}
	m.State = state
}

// AddNote adds a note to issue or (mr) merge request iid and returns its
// id.
func (g *GitLab) AddNote(project string, iid int, mr bool, author, body string) int64 {
	return g.addNote(project, GitLabNote{IID: iid, MR: mr, Author: author, Body: body})
}

// AddSystemNote adds a system note ("added 1 commit") and returns its id.
func (g *GitLab) AddSystemNote(project string, iid int, mr bool, author, body string) int64 {
	return g.addNote(project, GitLabNote{IID: iid, MR: mr, Author: author, Body: body, System: true})
}

// AddDiffNote adds a diff note on line of path in merge request iid and
// returns its id.
func (g *GitLab) AddDiffNote(project string, iid int, author, path string, line int, body string) int64 {
	return g.addNote(project, GitLabNote{IID: iid, MR: true, Author: author, Body: body, Path: path, Line: line})
}

func (g *GitLab) addNote(project string, n GitLabNote) int64 {
	g.s.mu.Lock()
	defer g.s.mu.Unlock()
	p := g.projectLocked(project)
	if (n.MR && p.mrs[n.IID] == nil) || (!n.MR && p.issues[n.IID] == nil) {
		panic(fmt.Sprintf("forgetest: no issue or merge request %s %d", project, n.IID))
	}
	g.userLocked(n.Author)
	n.ID, n.Created = g.s.next()
	p.notes = append(p.notes, &n)
	return n.ID
}

// MRs returns project's merge requests by iid.
func (g *GitLab) MRs(project string) []GitLabMR {
	g.s.mu.Lock()
	defer g.s.mu.Unlock()
	var out []GitLabMR
	for _, m := range g.projectLocked(project).mrs {
		out = append(out, *m)
	}
	slices.SortFunc(out, func(a, b GitLabMR) int { return a.IID - b.IID })
	return out
}

// Notes returns the notes on issue or (mr) merge request iid, oldest
// first.
func (g *GitLab) Notes(project string, iid int, mr bool) []GitLabNote {
	g.s.mu.Lock()
	defer g.s.mu.Unlock()
	var out []GitLabNote
	for _, n := range g.projectLocked(project).notes {
		if n.IID == iid && n.MR == mr {
			out = append(out, *n)
		}
	}
	return out
}

// gitlabDraftPrefixes are the title prefixes GitLab reads as a draft.
var gitlabDraftPrefixes = []string{"draft:", "[draft]", "(draft)"}

func gitlabIsDraft(title string) bool {
	t := strings.ToLower(strings.TrimSpace(title))
	for _, p := range gitlabDraftPrefixes {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

func gitlabError(w http.ResponseWriter, status int, msg any) {
	if msg == nil || msg == "" {
		msg = fmt.Sprintf("%d %s", status, http.StatusText(status))
	}
	scriptJSON(w, status, map[string]any{"message": msg})
}

func (g *GitLab) serve(w http.ResponseWriter, r *http.Request) {
	f, failed := g.s.record(r)
	if failed {
		for k, vs := range f.Header {
			w.Header()[k] = vs
		}
		if f.Status == http.StatusTooManyRequests && f.Message == "" {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(f.Status)
			fmt.Fprint(w, "Retry later\n")
			return
		}
		gitlabError(w, f.Status, f.Message)
		return
	}
	if g.Token == "" || (r.Header.Get("PRIVATE-TOKEN") != g.Token && r.Header.Get("Authorization") != "Bearer "+g.Token) {
		gitlabError(w, http.StatusUnauthorized, "401 Unauthorized")
		return
	}
	escaped, ok := strings.CutPrefix(r.URL.EscapedPath(), "/api/v4/")
	if !ok {
		gitlabError(w, 404, "404 Not Found")
		return
	}
	var parts []string
	for _, s := range strings.Split(strings.Trim(escaped, "/"), "/") {
		u, err := url.PathUnescape(s)
		if err != nil {
			gitlabError(w, 400, "400 Bad request")
			return
		}
		parts = append(parts, u)
	}
	g.s.mu.Lock()
	defer g.s.mu.Unlock()
	if len(parts) == 1 && parts[0] == "users" && r.Method == http.MethodGet {
		g.listUsers(w, r)
		return
	}
	if len(parts) < 2 || parts[0] != "projects" {
		gitlabError(w, 404, "404 Not Found")
		return
	}
	p := g.project(parts[1])
	if p == nil {
		gitlabError(w, 404, "404 Project Not Found")
		return
	}
	rest := parts[2:]
	iid := func(s string) int {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return 0
		}
		return n
	}
	switch {
	case len(rest) == 0 && r.Method == http.MethodGet:
		scriptJSON(w, 200, g.projectJSON(r, p))
	case len(rest) == 1 && rest[0] == "merge_requests" && r.Method == http.MethodGet:
		g.listMRs(w, r, p)
	case len(rest) == 1 && rest[0] == "merge_requests" && r.Method == http.MethodPost:
		g.createMR(w, r, p)
	case len(rest) == 2 && rest[0] == "merge_requests" && (r.Method == http.MethodGet || r.Method == http.MethodPut):
		m := p.mrs[iid(rest[1])]
		if m == nil {
			gitlabError(w, 404, "404 Not found")
			return
		}
		if r.Method == http.MethodPut {
			g.updateMR(w, r, p, m)
			return
		}
		scriptJSON(w, 200, g.mrJSON(r, p, m))
	case len(rest) == 2 && rest[0] == "issues" && r.Method == http.MethodGet:
		i := p.issues[iid(rest[1])]
		if i == nil {
			gitlabError(w, 404, "404 Not found")
			return
		}
		scriptJSON(w, 200, g.issueJSON(r, p, i))
	case len(rest) == 3 && (rest[0] == "issues" || rest[0] == "merge_requests") && rest[2] == "notes":
		mr := rest[0] == "merge_requests"
		n := iid(rest[1])
		if (mr && p.mrs[n] == nil) || (!mr && p.issues[n] == nil) {
			gitlabError(w, 404, "404 Not found")
			return
		}
		switch r.Method {
		case http.MethodGet:
			g.listNotes(w, r, p, n, mr)
		case http.MethodPost:
			g.createNote(w, r, p, n, mr)
		default:
			gitlabError(w, 405, "405 Method Not Allowed")
		}
	case len(rest) == 3 && rest[0] == "members" && rest[1] == "all" && r.Method == http.MethodGet:
		g.member(w, r, rest[2])
	default:
		gitlabError(w, 404, "404 Not Found")
	}
}

// project finds a project by its id or its full path.
func (g *GitLab) project(id string) *gitlabProject {
	if p := g.projects[strings.ToLower(id)]; p != nil {
		return p
	}
	for _, p := range g.projects {
		if strconv.FormatInt(p.id, 10) == id {
			return p
		}
	}
	return nil
}

func (g *GitLab) userJSON(r *http.Request, username string) any {
	u := g.users[username]
	if u == nil {
		return nil
	}
	// UserBasic: no bot field.
	return map[string]any{"id": u.id, "username": u.username, "name": username, "state": "active", "locked": false,
		"avatar_url": nil, "web_url": "http://" + r.Host + "/" + username}
}

func (g *GitLab) projectJSON(r *http.Request, p *gitlabProject) map[string]any {
	name := p.path[strings.LastIndex(p.path, "/")+1:]
	return map[string]any{"id": p.id, "name": name, "path": name, "path_with_namespace": p.path, "name_with_namespace": strings.ReplaceAll(p.path, "/", " / "),
		"default_branch": p.defaultBranch, "visibility": "private", "web_url": "http://" + r.Host + "/" + p.path,
		"http_url_to_repo": "http://" + r.Host + "/" + p.path + ".git", "created_at": scriptTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
}

func (g *GitLab) mrJSON(r *http.Request, p *gitlabProject, m *GitLabMR) map[string]any {
	src := m.SourceProjectID
	if src == 0 {
		src = p.id
	}
	var merged, closed time.Time
	switch m.State {
	case "merged":
		merged = m.Created.Add(time.Hour)
	case "closed":
		closed = m.Created.Add(time.Hour)
	}
	draft := gitlabIsDraft(m.Title)
	return map[string]any{
		"id": m.ID, "iid": m.IID, "project_id": p.id, "title": m.Title, "description": m.Description, "state": m.State,
		"created_at": scriptTime(m.Created), "updated_at": scriptTime(m.Created), "merged_at": scriptOptTime(merged), "closed_at": scriptOptTime(closed),
		"merged_by": nil, "closed_by": nil, "target_branch": m.Target, "source_branch": m.Source, "user_notes_count": 0,
		"upvotes": 0, "downvotes": 0, "author": g.userJSON(r, m.Author), "assignees": []any{}, "reviewers": []any{},
		"source_project_id": src, "target_project_id": p.id, "labels": []any{}, "draft": draft, "work_in_progress": draft,
		"milestone": nil, "merge_when_pipeline_succeeds": false, "merge_status": "can_be_merged", "detailed_merge_status": "mergeable",
		"sha": m.SHA, "merge_commit_sha": nil, "squash_commit_sha": nil, "discussion_locked": nil, "should_remove_source_branch": nil,
		"force_remove_source_branch": false, "squash": false,
		"references":    map[string]string{"short": "!" + strconv.Itoa(m.IID), "relative": "!" + strconv.Itoa(m.IID), "full": p.path + "!" + strconv.Itoa(m.IID)},
		"web_url":       "http://" + r.Host + "/" + p.path + "/-/merge_requests/" + strconv.Itoa(m.IID),
		"has_conflicts": false, "blocking_discussions_resolved": true,
	}
}

func (g *GitLab) issueJSON(r *http.Request, p *gitlabProject, i *gitlabIssue) map[string]any {
	return map[string]any{
		"id": i.id, "iid": i.iid, "project_id": p.id, "title": i.title, "description": i.description, "state": i.state,
		"created_at": scriptTime(i.created), "updated_at": scriptTime(i.created), "closed_at": nil, "closed_by": nil,
		"labels": []any{}, "milestone": nil, "assignees": []any{}, "author": g.userJSON(r, i.author), "type": "ISSUE",
		"user_notes_count": 0, "confidential": false, "discussion_locked": nil, "issue_type": "issue",
		"web_url":    "http://" + r.Host + "/" + p.path + "/-/issues/" + strconv.Itoa(i.iid),
		"references": map[string]string{"short": "#" + strconv.Itoa(i.iid), "relative": "#" + strconv.Itoa(i.iid), "full": p.path + "#" + strconv.Itoa(i.iid)},
	}
}

func (g *GitLab) noteJSON(r *http.Request, p *gitlabProject, n *GitLabNote) map[string]any {
	typ, noteable := any(nil), "Issue"
	if n.MR {
		noteable = "MergeRequest"
	}
	out := map[string]any{"id": n.ID, "body": n.Body, "attachment": nil, "author": g.userJSON(r, n.Author),
		"created_at": scriptTime(n.Created), "updated_at": scriptTime(n.Created), "system": n.System,
		"noteable_id": 100 + n.IID, "noteable_type": noteable, "noteable_iid": n.IID, "project_id": p.id,
		"resolvable": false, "confidential": false, "internal": false, "commands_changes": map[string]any{}}
	if n.Path != "" {
		typ = "DiffNote"
		out["resolvable"], out["resolved"] = true, false
		out["position"] = map[string]any{"base_sha": fmt.Sprintf("%040x", 1), "start_sha": fmt.Sprintf("%040x", 1), "head_sha": fmt.Sprintf("%040x", 2),
			"old_path": n.Path, "new_path": n.Path, "position_type": "text", "old_line": nil, "new_line": n.Line, "line_range": nil}
	}
	out["type"] = typ
	return out
}

func (g *GitLab) listMRs(w http.ResponseWriter, r *http.Request, p *gitlabProject) {
	q := r.URL.Query()
	state := q.Get("state")
	if state == "" {
		state = "all"
	}
	var mrs []*GitLabMR
	for _, m := range p.mrs {
		if state != "all" && m.State != state {
			continue
		}
		if b := q.Get("source_branch"); b != "" && b != m.Source {
			continue
		}
		if b := q.Get("target_branch"); b != "" && b != m.Target {
			continue
		}
		mrs = append(mrs, m)
	}
	asc := q.Get("sort") == "asc"
	slices.SortFunc(mrs, func(a, b *GitLabMR) int {
		if asc {
			return a.IID - b.IID
		}
		return b.IID - a.IID
	})
	out := make([]map[string]any, len(mrs))
	for i, m := range mrs {
		out[i] = g.mrJSON(r, p, m)
	}
	scriptPage(w, r, out, 20, 100, g.PageSize, true, !g.NoLink)
}

func (g *GitLab) createMR(w http.ResponseWriter, r *http.Request, p *gitlabProject) {
	in, err := scriptDecode(r)
	if err != nil {
		gitlabError(w, 400, "400 Bad request - "+err.Error())
		return
	}
	title, _ := in["title"].(string)
	desc, _ := in["description"].(string)
	src, _ := in["source_branch"].(string)
	dst, _ := in["target_branch"].(string)
	switch {
	case src == "":
		scriptJSON(w, 400, map[string]any{"error": "source_branch is missing"})
		return
	case dst == "":
		scriptJSON(w, 400, map[string]any{"error": "target_branch is missing"})
		return
	case title == "":
		scriptJSON(w, 400, map[string]any{"error": "title is missing"})
		return
	case src == dst:
		gitlabError(w, 422, []string{"You can't use same project/branch for source and target"})
		return
	}
	sha := ""
	if g.Branch != nil {
		var ok bool
		if sha, ok = g.Branch(p.path, src); !ok {
			gitlabError(w, 422, []string{"Source branch \"" + src + "\" does not exist"})
			return
		}
		if _, ok := g.Branch(p.path, dst); !ok {
			gitlabError(w, 422, []string{"Target branch \"" + dst + "\" does not exist"})
			return
		}
	}
	for _, m := range p.mrs {
		if m.State == "opened" && m.Source == src && m.Target == dst && m.SourceProjectID == 0 {
			gitlabError(w, 409, []string{"Another open merge request already exists for this source branch: !" + strconv.Itoa(m.IID)})
			return
		}
	}
	p.mrIID++
	m := &GitLabMR{Project: p.path, IID: p.mrIID, Title: title, Description: desc, Source: src, Target: dst, State: "opened", Author: gitlabOwner(p.path)}
	m.ID, m.Created = g.s.next()
	if sha == "" {
		sha = fmt.Sprintf("%040x", m.ID)
	}
	m.SHA = sha
	g.userLocked(m.Author)
	p.mrs[m.IID] = m
	scriptJSON(w, http.StatusCreated, g.mrJSON(r, p, m))
}

func (g *GitLab) updateMR(w http.ResponseWriter, r *http.Request, p *gitlabProject, m *GitLabMR) {
	in, err := scriptDecode(r)
	if err != nil {
		gitlabError(w, 400, "400 Bad request - "+err.Error())
		return
	}
	if s, ok := in["title"].(string); ok {
		if s == "" {
			gitlabError(w, 400, map[string][]string{"title": {"can't be blank"}})
			return
		}
		m.Title = s
	}
	if s, ok := in["description"].(string); ok {
		m.Description = s
	}
	switch in["state_event"] {
	case "close":
		if m.State == "opened" || m.State == "locked" {
			m.State = "closed"
		}
	case "reopen":
		if m.State == "closed" {
			for _, o := range p.mrs {
				if o != m && o.State == "opened" && o.Source == m.Source && o.Target == m.Target {
					gitlabError(w, 409, []string{"Another open merge request already exists for this source branch: !" + strconv.Itoa(o.IID)})
					return
				}
			}
			m.State = "opened"
		}
	case nil:
	default:
		scriptJSON(w, 400, map[string]any{"error": "state_event does not have a valid value"})
		return
	}
	scriptJSON(w, 200, g.mrJSON(r, p, m))
}

func (g *GitLab) listNotes(w http.ResponseWriter, r *http.Request, p *gitlabProject, iid int, mr bool) {
	var notes []*GitLabNote
	for _, n := range p.notes {
		if n.IID == iid && n.MR == mr {
			notes = append(notes, n)
		}
	}
	// GitLab's default is newest first.
	if r.URL.Query().Get("sort") != "asc" {
		slices.Reverse(notes)
	}
	out := make([]map[string]any, len(notes))
	for i, n := range notes {
		out[i] = g.noteJSON(r, p, n)
	}
	scriptPage(w, r, out, 20, 100, g.PageSize, true, !g.NoLink)
}

func (g *GitLab) createNote(w http.ResponseWriter, r *http.Request, p *gitlabProject, iid int, mr bool) {
	in, err := scriptDecode(r)
	if err != nil {
		gitlabError(w, 400, "400 Bad request - "+err.Error())
		return
	}
	body, _ := in["body"].(string)
	if body == "" {
		scriptJSON(w, 400, map[string]any{"error": "body is missing"})
		return
	}
	n := &GitLabNote{IID: iid, MR: mr, Author: gitlabOwner(p.path), Body: body}
	g.userLocked(n.Author)
	n.ID, n.Created = g.s.next()
	p.notes = append(p.notes, n)
	scriptJSON(w, http.StatusCreated, g.noteJSON(r, p, n))
}

func (g *GitLab) listUsers(w http.ResponseWriter, r *http.Request) {
	out := []map[string]any{}
	want := r.URL.Query().Get("username")
	for _, u := range g.users {
		if want != "" && !strings.EqualFold(u.username, want) {
			continue
		}
		m := g.userJSON(r, u.username).(map[string]any)
		m["bot"] = u.bot
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b map[string]any) int { return int(a["id"].(int64) - b["id"].(int64)) })
	scriptPage(w, r, out, 20, 100, g.PageSize, true, !g.NoLink)
}

func (g *GitLab) member(w http.ResponseWriter, r *http.Request, id string) {
	for _, u := range g.users {
		if strconv.FormatInt(u.id, 10) == id && u.access > 0 {
			m := g.userJSON(r, u.username).(map[string]any)
			m["access_level"] = u.access
			m["created_at"] = scriptTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			m["expires_at"] = nil
			m["membership_state"] = "active"
			scriptJSON(w, 200, m)
			return
		}
	}
	gitlabError(w, 404, "404 Not found")
}

// gitlabOwner is the user the token is taken to be: the project's top
// group.
func gitlabOwner(path string) string {
	owner, _, _ := strings.Cut(path, "/")
	return owner
}
