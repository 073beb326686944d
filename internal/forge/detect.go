package forge

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Detect works out the forge, its API URL and the repository from a git
// remote URL in any form git accepts (https://host/owner/name.git,
// http://127.0.0.1:PORT/owner/name.git, ssh://git@host/owner/name.git,
// git@host:owner/name.git; GitLab's group paths of several segments).
// github.com and gitlab.com are known; any other host needs kind (from
// --forge), and its API is derived as https://host/api/v3 (GitHub
// Enterprise), /api/v1 (Gitea) or /api/v4 (GitLab), on the remote's own
// scheme and port only for http(s). api and repo (--forge-api,
// --forge-repo), when set, override what is derived; with kind, api and
// repo all set the remote may be anything (a local path). The Target's
// Token is left empty: the caller fills it.
func Detect(remoteURL string, kind Kind, api, repo string) (Target, error) {
	if kind != "" && !slices.Contains(Kinds, kind) {
		return Target{}, fmt.Errorf("unknown forge %q; pass --forge github|gitea|gitlab", string(kind))
	}
	var r *remote
	var rerr error
	if strings.TrimSpace(remoteURL) != "" {
		r, rerr = parseRemote(remoteURL)
		if errors.Is(rerr, errCredentials) {
			return Target{}, rerr
		}
	} else {
		rerr = errors.New("there is no remote URL to tell the forge and repository from; pass --forge github|gitea|gitlab, --forge-api URL and --forge-repo OWNER/NAME")
	}
	known := Kind("")
	if r != nil {
		known = knownHosts[r.host]
	}
	switch {
	case kind == "" && r == nil:
		return Target{}, rerr
	case kind == "" && known == "":
		return Target{}, fmt.Errorf("cannot tell which forge %s is; pass --forge github|gitea|gitlab", r.display)
	case kind == "":
		kind = known
	case known != "" && known != kind && api == "":
		return Target{}, fmt.Errorf("the remote %s is on %s, a %s forge, not %s; drop --forge or pass --forge-api", r.display, r.host, known, kind)
	}
	t := Target{Kind: kind}
	var err error
	if api != "" {
		t.API, err = checkAPI(api)
	} else if r == nil {
		return Target{}, fmt.Errorf("%v; or pass --forge-api URL and --forge-repo OWNER/NAME", rerr)
	} else {
		t.API, err = r.api(kind)
	}
	if err != nil {
		return Target{}, err
	}
	if repo != "" {
		t.Repo = strings.Trim(repo, "/")
		if err := checkRepo(kind, t.Repo); err != nil {
			return Target{}, fmt.Errorf("--forge-repo %q: %v", repo, err)
		}
		return t, nil
	}
	if r == nil {
		return Target{}, fmt.Errorf("%v; or pass --forge-repo OWNER/NAME", rerr)
	}
	t.Repo = r.path
	if err := checkRepo(kind, t.Repo); err != nil {
		return Target{}, fmt.Errorf("the remote %s: %v; pass --forge-repo OWNER/NAME (and --forge-api if the forge is under a path)", r.display, err)
	}
	return t, nil
}

// knownHosts are the forges Detect recognises by their host.
var knownHosts = map[string]Kind{
	"github.com":        GitHub,
	"www.github.com":    GitHub,
	"ssh.github.com":    GitHub,
	"gitlab.com":        GitLab,
	"www.gitlab.com":    GitLab,
	"altssh.gitlab.com": GitLab,
}

var errCredentials = errors.New("remove credentials from the remote URL")

// remote is a parsed git remote URL.
type remote struct {
	scheme  string // https, http, ssh, git; "ssh" for scp-like
	host    string // lower case, no port, no brackets
	port    string
	path    string // without slashes around it or .git
	display string // for messages: no credentials
}

// scpLike is git's [user@]host:path, recognised when a colon comes before
// any slash.
var scpLike = regexp.MustCompile(`^(?:([^@/]*)@)?(\[[^\]/]+\]|[^:/\[\]@]+):(.*)$`)

func parseRemote(raw string) (*remote, error) {
	s := strings.TrimSpace(raw)
	display := withoutUser(s)
	if i := strings.Index(s, "://"); i > 0 {
		scheme := strings.ToLower(s[:i])
		if display != s { // user information: a token, or user:password
			user := s[i+3 : len(s)-len(display)+i+3]
			if scheme == "http" || scheme == "https" || strings.Contains(user, ":") {
				return nil, credentials(display)
			}
		}
		u, err := url.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("the remote %s is not a URL git accepts", display)
		}
		r := &remote{scheme: strings.ToLower(u.Scheme), host: strings.ToLower(u.Hostname()), port: u.Port(), display: display}
		switch r.scheme {
		case "https", "http":
		case "ssh", "git+ssh", "ssh+git":
			r.scheme = "ssh"
		case "git":
		case "file":
			return nil, fmt.Errorf("the remote %s is a local path, not a forge", display)
		default:
			return nil, fmt.Errorf("the remote %s uses %s://, which factory cannot tell a forge from", display, r.scheme)
		}
		if r.host == "" {
			return nil, fmt.Errorf("the remote %s has no host", display)
		}
		r.path = cleanPath(u.Path)
		return r, nil
	}
	m := scpLike.FindStringSubmatch(s)
	if m == nil || len(m[2]) == 1 { // "C:\..." is a Windows path
		return nil, fmt.Errorf("the remote %s is a local path, not a forge", display)
	}
	if strings.Contains(m[1], ":") {
		return nil, credentials(display)
	}
	return &remote{scheme: "ssh", host: strings.ToLower(strings.Trim(m[2], "[]")), path: cleanPath(m[3]), display: display}, nil
}

func credentials(display string) error {
	return fmt.Errorf("the remote %s holds a user name, password or token: %w (git remote set-url NAME URL); factory reads the token from the environment (%s, %s, %s)",
		display, errCredentials, TokenVars(GitHub)[0], TokenVars(Gitea)[0], TokenVars(GitLab)[0])
}

// cleanPath is a remote's repository path without the slashes around it
// and the .git suffix.
func cleanPath(p string) string {
	p = strings.Trim(p, "/")
	p = strings.TrimSuffix(p, ".git")
	return strings.Trim(p, "/")
}

// api derives the forge's API URL from the remote's host.
func (r *remote) api(k Kind) (string, error) {
	switch {
	case k == GitHub && knownHosts[r.host] == GitHub:
		return "https://api.github.com", nil
	case k == GitLab && knownHosts[r.host] == GitLab:
		return "https://gitlab.com/api/v4", nil
	}
	host := r.host
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	origin := "https://" + host
	switch r.scheme {
	case "https":
		if r.port != "" {
			origin = "https://" + net.JoinHostPort(r.host, r.port)
		}
	case "http":
		if !loopback(r.host) {
			return "", fmt.Errorf("the remote %s is plain http on a host other than this machine: the token would travel in clear; use its https URL", r.display)
		}
		origin = "http://" + host
		if r.port != "" {
			origin = "http://" + net.JoinHostPort(r.host, r.port)
		}
	}
	suffix := map[Kind]string{GitHub: "/api/v3", Gitea: "/api/v1", GitLab: "/api/v4"}[k]
	return checkAPI(origin + suffix)
}

// repoSegment is one segment of a repository path on every forge.
var repoSegment = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// checkRepo checks a repository path: OWNER/NAME, or GitLab's
// GROUP/…/NAME.
func checkRepo(k Kind, repo string) error {
	parts := strings.Split(repo, "/")
	if k == GitLab {
		if len(parts) < 2 {
			return fmt.Errorf("%q is not a project path GROUP/NAME", repo)
		}
	} else if len(parts) != 2 {
		return fmt.Errorf("%q is not OWNER/NAME", repo)
	}
	for _, p := range parts {
		if !repoSegment.MatchString(p) || p == "." || p == ".." {
			return fmt.Errorf("%q is not a repository path (names are letters, digits, '.', '_' and '-')", repo)
		}
	}
	return nil
}

// withoutUser is a URL without the user information between :// and @,
// for messages; it works on URLs that do not parse too.
func withoutUser(raw string) string {
	i := strings.Index(raw, "://")
	if i < 0 {
		return raw
	}
	rest := raw[i+3:]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	at := strings.LastIndex(rest[:end], "@")
	if at < 0 {
		return raw
	}
	return raw[:i+3] + rest[at+1:]
}
