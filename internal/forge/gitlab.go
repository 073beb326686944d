package forge

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// gitlabClient speaks GitLab's API v4 at https://HOST/api/v4: merge
// requests (numbered by iid), issues, notes, members.
type gitlabClient struct {
	a       *api
	project string // /projects/GROUP%2F…%2FNAME
}

func newGitLab(a *api) (*gitlabClient, error) {
	if err := checkRepo(GitLab, a.target.Repo); err != nil {
		return nil, fmt.Errorf("--forge-repo: %v", err)
	}
	return &gitlabClient{a: a, project: "/projects/" + url.PathEscape(a.target.Repo)}, nil
}

func (c *gitlabClient) Target() Target { return c.a.target }

// The parts of GitLab's answers factory reads.
type (
	gitlabUser struct {
		ID       int64  `json:"id"`
		Username string `json:"username"`
		Bot      bool   `json:"bot"`
		State    string `json:"state"`
	}
	gitlabMR struct {
		IID             int    `json:"iid"`
		WebURL          string `json:"web_url"`
		State           string `json:"state"`
		Draft           bool   `json:"draft"`
		WorkInProgress  bool   `json:"work_in_progress"`
		Title           string `json:"title"`
		Description     string `json:"description"`
		SourceBranch    string `json:"source_branch"`
		TargetBranch    string `json:"target_branch"`
		SHA             string `json:"sha"`
		SourceProjectID int64  `json:"source_project_id"`
		TargetProjectID int64  `json:"target_project_id"`
	}
	gitlabIssue struct {
		IID         int        `json:"iid"`
		WebURL      string     `json:"web_url"`
		Title       string     `json:"title"`
		Description string     `json:"description"`
		Author      gitlabUser `json:"author"`
		State       string     `json:"state"`
	}
	gitlabNote struct {
		ID        int64      `json:"id"`
		Body      string     `json:"body"`
		Author    gitlabUser `json:"author"`
		CreatedAt time.Time  `json:"created_at"`
		System    bool       `json:"system"`
		Type      string     `json:"type"`
		Position  *struct {
			NewPath string `json:"new_path"`
			OldPath string `json:"old_path"`
			NewLine *int   `json:"new_line"`
			OldLine *int   `json:"old_line"`
		} `json:"position"`
	}
)

// gitlabDraft are the title prefixes GitLab reads as a draft (any case).
var gitlabDraft = []string{"Draft:", "[Draft]", "(Draft)"}

// gitlabBotName matches the users GitLab makes for project and group
// access tokens (project_123_bot, project_123_bot_0a1b…), and service
// accounts.
var gitlabBotName = regexp.MustCompile(`^((project|group)_\d+_bot(\d+|_[0-9a-f]+)?|service_account_.*)$`)

func (u gitlabUser) user() User {
	return User{Login: u.Username, Bot: u.Bot || strings.HasSuffix(u.Username, "_bot") || strings.HasSuffix(u.Username, "-bot") || gitlabBotName.MatchString(u.Username)}
}

func (m *gitlabMR) pr() (*PR, error) {
	if err := positive("merge request", m.IID); err != nil {
		return nil, err
	}
	_, prefixed := cutPrefix(m.Title, gitlabDraft)
	out := &PR{Number: m.IID, URL: m.WebURL, Draft: m.Draft || m.WorkInProgress || prefixed, Title: m.Title,
		Body: m.Description, Head: m.SourceBranch, Base: m.TargetBranch, HeadSHA: m.SHA}
	switch m.State {
	case "opened", "locked":
		out.State = Open
	case "closed":
		out.State = Closed
	case "merged":
		out.State = Merged
	default:
		return nil, fmt.Errorf("merge request !%d has the unknown state %q", m.IID, bound(oneLine(m.State), 40))
	}
	return out, nil
}

func (i *gitlabIssue) issue() (*Issue, error) {
	if err := positive("issue", i.IID); err != nil {
		return nil, err
	}
	st, err := openClosed(i.State, "opened")
	if err != nil {
		return nil, fmt.Errorf("issue #%d: %v", i.IID, err)
	}
	return &Issue{Number: i.IID, URL: i.WebURL, Title: i.Title, Body: i.Description, Author: i.Author.user(), State: st}, nil
}

// comment converts a note; ok is false for a system note ("changed the
// description", "added 1 commit"), which no one wrote.
func (n *gitlabNote) comment() (cm Comment, ok bool, err error) {
	if n.ID <= 0 {
		return Comment{}, false, fmt.Errorf("a note with the id %d", n.ID)
	}
	if n.System {
		return Comment{}, false, nil
	}
	cm = Comment{ID: n.ID, Author: n.Author.user(), Body: n.Body, Created: n.CreatedAt}
	if p := n.Position; p != nil || n.Type == "DiffNote" {
		cm.Review = true
		if p != nil {
			cm.Path = p.NewPath
			if cm.Path == "" {
				cm.Path = p.OldPath
			}
			if p.NewLine != nil {
				cm.Line = *p.NewLine
			} else if p.OldLine != nil {
				cm.Line = *p.OldLine
			}
		}
	}
	return cm, true, nil
}

func (c *gitlabClient) DefaultBranch(ctx context.Context) (string, error) {
	var p struct {
		DefaultBranch string `json:"default_branch"`
	}
	if err := c.a.get(ctx, c.project, nil, &p); err != nil {
		return "", err
	}
	if p.DefaultBranch == "" {
		return "", fmt.Errorf("gitlab: %s has no default branch (an empty project?)", c.a.target.Repo)
	}
	return p.DefaultBranch, nil
}

func (c *gitlabClient) FindPR(ctx context.Context, head string) (*PR, error) {
	if head == "" {
		return nil, fmt.Errorf("FindPR: no branch")
	}
	q := url.Values{"source_branch": {head}, "state": {"all"}, "order_by": {"created_at"}, "sort": {"desc"}, "per_page": {"100"}}
	// The newest is on the first page: read only that one.
	var mrs []gitlabMR
	if err := c.a.get(ctx, c.project+"/merge_requests", q, &mrs); err != nil {
		return nil, err
	}
	return newestGitLab(mrs, head)
}

// newestGitLab is the merge request with the highest iid whose source is
// branch head of the project itself (not a fork).
func newestGitLab(mrs []gitlabMR, head string) (*PR, error) {
	var best *PR
	for i := range mrs {
		m := &mrs[i]
		if m.SourceBranch != head || m.SourceProjectID != m.TargetProjectID {
			continue
		}
		pr, err := m.pr()
		if err != nil {
			return nil, fmt.Errorf("gitlab: %v", err)
		}
		if best == nil || pr.Number > best.Number {
			best = pr
		}
	}
	return best, nil
}

func (c *gitlabClient) mr(ctx context.Context, c2 call) (*PR, error) {
	var m gitlabMR
	if _, err := c.a.do(ctx, c2, &m); err != nil {
		return nil, err
	}
	pr, err := m.pr()
	if err != nil {
		return nil, fmt.Errorf("gitlab %s %s: %v", c2.method, c2.path, err)
	}
	return pr, nil
}

func (c *gitlabClient) CreatePR(ctx context.Context, p NewPR) (*PR, error) {
	title := p.Title
	if _, draft := cutPrefix(title, gitlabDraft); p.Draft && !draft {
		title = "Draft: " + title
	}
	in := map[string]any{"source_branch": p.Head, "target_branch": p.Base, "title": title, "description": p.Body}
	return c.mr(ctx, call{method: http.MethodPost, path: c.project + "/merge_requests", in: in})
}

func (c *gitlabClient) UpdatePR(ctx context.Context, number int, u PRUpdate) (*PR, error) {
	if err := positive("merge request", number); err != nil {
		return nil, err
	}
	path := c.project + "/merge_requests/" + strconv.Itoa(number)
	put := map[string]any{}
	if u.Title != nil {
		put["title"] = *u.Title
	}
	if u.Body != nil {
		put["description"] = *u.Body
	}
	if u.State != nil {
		switch *u.State {
		case Open:
			put["state_event"] = "reopen"
		case Closed:
			put["state_event"] = "close"
		default:
			return nil, fmt.Errorf("UpdatePR: a merge request cannot be set %q", *u.State)
		}
	}
	if u.Draft != nil {
		title := ""
		if u.Title != nil {
			title = *u.Title
		} else {
			cur, err := c.mr(ctx, call{method: http.MethodGet, path: path})
			if err != nil {
				return nil, err
			}
			title = cur.Title
		}
		bare, draft := cutPrefix(title, gitlabDraft)
		switch {
		case *u.Draft && !draft:
			put["title"] = "Draft: " + title
		case !*u.Draft && draft:
			put["title"] = bare
		}
	}
	if len(put) == 0 {
		return c.mr(ctx, call{method: http.MethodGet, path: path})
	}
	return c.mr(ctx, call{method: http.MethodPut, path: path, in: put})
}

// notes is the notes path of merge request (pr) or issue number.
func (c *gitlabClient) notes(number int, pr bool) string {
	kind := "/issues/"
	if pr {
		kind = "/merge_requests/"
	}
	return c.project + kind + strconv.Itoa(number) + "/notes"
}

func (c *gitlabClient) Comment(ctx context.Context, number int, pr bool, body string) (*Comment, error) {
	if err := positive("issue or merge request", number); err != nil {
		return nil, err
	}
	var n gitlabNote
	path := c.notes(number, pr)
	if _, err := c.a.do(ctx, call{method: http.MethodPost, path: path, in: map[string]string{"body": body}}, &n); err != nil {
		return nil, err
	}
	n.System = false // a note factory wrote
	cm, _, err := n.comment()
	if err != nil {
		return nil, fmt.Errorf("gitlab POST %s: %v", path, err)
	}
	return &cm, nil
}

func (c *gitlabClient) Issue(ctx context.Context, number int) (*Issue, error) {
	if err := positive("issue", number); err != nil {
		return nil, err
	}
	var raw gitlabIssue
	path := c.project + "/issues/" + strconv.Itoa(number)
	if err := c.a.get(ctx, path, nil, &raw); err != nil {
		return nil, err
	}
	out, err := raw.issue()
	if err != nil {
		return nil, fmt.Errorf("gitlab GET %s: %v", path, err)
	}
	return out, nil
}

func (c *gitlabClient) Comments(ctx context.Context, number int, pr bool) ([]Comment, error) {
	if err := positive("issue or merge request", number); err != nil {
		return nil, err
	}
	q := url.Values{"sort": {"asc"}, "order_by": {"created_at"}, "per_page": {"100"}}
	notes, err := list[gitlabNote](ctx, c.a, c.notes(number, pr), q, nil)
	if err != nil {
		return nil, err
	}
	return gitlabComments(notes)
}

// gitlabComments converts notes, leaving system notes out, oldest first.
func gitlabComments(notes []gitlabNote) ([]Comment, error) {
	out := make([]Comment, 0, len(notes))
	for i := range notes {
		cm, ok, err := notes[i].comment()
		if err != nil {
			return nil, fmt.Errorf("gitlab: %v", err)
		}
		if ok {
			out = append(out, cm)
		}
	}
	sortComments(out)
	return out, nil
}

// gitlabDeveloper is the Developer role's access level, the lowest that
// may push.
const gitlabDeveloper = 30

func (c *gitlabClient) CanWrite(ctx context.Context, login string) (bool, error) {
	if _, err := seg("login", login); err != nil {
		return false, nil
	}
	var users []gitlabUser
	if err := c.a.get(ctx, "/users", url.Values{"username": {login}}, &users); err != nil {
		return false, err
	}
	var id int64
	for _, u := range users {
		if strings.EqualFold(u.Username, login) && u.ID > 0 {
			id = u.ID
			break
		}
	}
	if id == 0 {
		return false, nil
	}
	var m struct {
		AccessLevel int    `json:"access_level"`
		State       string `json:"state"`
	}
	err := c.a.get(ctx, c.project+"/members/all/"+strconv.FormatInt(id, 10), nil, &m)
	if fe, ok := err.(*Error); ok && fe.Status == http.StatusNotFound {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return m.AccessLevel >= gitlabDeveloper && (m.State == "" || m.State == "active"), nil
}
