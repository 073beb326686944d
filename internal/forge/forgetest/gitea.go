// Package forgetest runs forges for tests on 127.0.0.1: a real Gitea
// (StartGitea) and scripted GitHub and GitLab API servers.
package forgetest

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// GiteaVersion is the Gitea the tests run, built by scripts/gitea.sh.
const GiteaVersion = "v1.26.0"

// Gitea is a real Gitea server on 127.0.0.1 for one test.
type Gitea struct {
	URL   string // http://127.0.0.1:PORT, no trailing slash
	API   string // URL + "/api/v1"
	Admin string // the admin's login
	Token string // the admin's access token, scope all

	dir    string // the server's work dir: app.ini, gitea.db, data/, repos/, log/
	client *http.Client
}

// giteaBinary finds the Gitea binary and its STATIC_ROOT_PATH: $FACTORY_GITEA
// (the static dir next to it), else the cache scripts/gitea.sh fills. It skips
// the test when neither is there, or fails it when FACTORY_REQUIRE_GITEA=1 or
// FACTORY_GITEA names a missing file.
func giteaBinary(t testing.TB) (bin, static string) {
	t.Helper()
	bin = os.Getenv("FACTORY_GITEA")
	explicit := bin != ""
	if !explicit {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatalf("gitea: no home directory to find the cached build in: %v", err)
		}
		bin = filepath.Join(home, ".cache", "factory", "gitea", GiteaVersion, "gitea")
	}
	static = filepath.Join(filepath.Dir(bin), "static")
	_, errBin := os.Stat(bin)
	_, errStatic := os.Stat(filepath.Join(static, "templates"))
	if errBin == nil && errStatic == nil {
		return bin, static
	}
	msg := fmt.Sprintf("gitea: not built (%s or %s missing); run scripts/gitea.sh (builds Gitea %s into ~/.cache/factory/gitea once: ~17 min of CPU) or set FACTORY_GITEA to a built binary",
		bin, filepath.Join(static, "templates"), GiteaVersion)
	if explicit || os.Getenv("FACTORY_REQUIRE_GITEA") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return "", ""
}

// StartGitea starts a Gitea in a fresh directory on a free port, with an
// admin account and its token; it is stopped and removed when the test ends.
// It skips the test when Gitea is not built (see giteaBinary).
func StartGitea(t testing.TB) *Gitea {
	t.Helper()
	bin, static := giteaBinary(t)
	began := time.Now()

	// On tmpfs when there is one: Gitea's SQLite and git fsync a lot, and
	// `gitea migrate` takes 1 s there against 6 s on this disk under load.
	dir, err := os.MkdirTemp("/dev/shm", "gitea-test-")
	if err != nil {
		if dir, err = os.MkdirTemp("", "gitea-test-"); err != nil {
			t.Fatal(err)
		}
	}
	// Registered first, so it runs last: after the server is stopped.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gitea: keeping %s of a failed test (logs in log/, gitea.out)", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	for _, d := range []string{"home", "log", "custom"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	port := giteaFreePort(t)
	g := &Gitea{
		URL:    fmt.Sprintf("http://127.0.0.1:%d", port),
		Admin:  "factory-admin",
		dir:    dir,
		client: &http.Client{Timeout: 30 * time.Second},
	}
	g.API = g.URL + "/api/v1"

	ini := fmt.Sprintf(`APP_NAME = factory test
RUN_MODE = prod
WORK_PATH = %[1]s

[server]
PROTOCOL = http
HTTP_ADDR = 127.0.0.1
HTTP_PORT = %[2]d
ROOT_URL = %[3]s/
DISABLE_SSH = true
OFFLINE_MODE = true
APP_DATA_PATH = %[1]s/data
STATIC_ROOT_PATH = %[4]s

[database]
DB_TYPE = sqlite3
PATH = %[1]s/gitea.db

[repository]
ROOT = %[1]s/repos
DEFAULT_BRANCH = main

[security]
INSTALL_LOCK = true
SECRET_KEY = %[5]s
INTERNAL_TOKEN = %[6]s

[oauth2]
JWT_SECRET = %[7]s

[service]
DISABLE_REGISTRATION = true

[indexer]
ISSUE_INDEXER_TYPE = db

[mailer]
ENABLED = false

[cron.update_checker]
ENABLED = false

[i18n]
LANGS = en-US
NAMES = English

[log]
MODE = file
LEVEL = Info
ROOT_PATH = %[1]s/log
`, dir, port, g.URL, static, giteaSecret(t, 32), giteaSecret(t, 48), giteaSecret(t, 32))
	conf := filepath.Join(dir, "app.ini")
	if err := os.WriteFile(conf, []byte(ini), 0o600); err != nil {
		t.Fatal(err)
	}

	// Gitea's own environment: no variable of the test's (GIT_*, GITEA_*,
	// tokens) and a HOME of its own, so the user's ~/.gitconfig is untouched.
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + filepath.Join(dir, "home"),
		"GITEA_WORK_DIR=" + dir,
		"GITEA_CUSTOM=" + filepath.Join(dir, "custom"),
		"USER=" + os.Getenv("USER"),
		"TMPDIR=" + os.TempDir(),
	}
	if os.Geteuid() == 0 {
		env = append(env, "GITEA_I_AM_BEING_UNSAFE_RUNNING_AS_ROOT=true")
	}
	gitea := func(args ...string) *exec.Cmd {
		cmd := exec.Command(bin, append([]string{"--config", conf, "--work-path", dir}, args...)...)
		cmd.Dir, cmd.Env = dir, env
		return cmd
	}
	run := func(args ...string) string {
		t.Helper()
		out, err := gitea(args...).CombinedOutput()
		if err != nil {
			t.Fatalf("gitea %s: %v\n%s", args[0], err, out)
		}
		return string(out)
	}

	run("migrate")
	password := giteaSecret(t, 24)
	out := run("admin", "user", "create", "--username", g.Admin, "--password", password,
		"--email", g.Admin+"@example.invalid", "--admin", "--must-change-password=false",
		"--access-token", "--access-token-name", "factory-test", "--access-token-scopes", "all")
	m := regexp.MustCompile(`(?m)^Access token was successfully created\.\.\. ([0-9a-f]{40})\s*$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("gitea admin user create printed no access token:\n%s", out)
	}
	g.Token = m[1]

	logPath := filepath.Join(dir, "gitea.out")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := gitea("web")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group, killed in cleanup; and killed with the test
	// binary if that dies first (a go test -timeout panic runs no cleanup).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("gitea web: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logFile.Close(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})

	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := g.client.Get(g.API + "/version")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
			err = errors.New(resp.Status)
		}
		select {
		case <-exited:
			t.Fatalf("gitea web exited before answering at %s; %s ends:\n%s", g.URL, logPath, giteaTail(logPath, 40))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("gitea web did not answer %s/version within 60 s (%v); logs: %s and %s; %s ends:\n%s",
				g.API, err, logPath, filepath.Join(dir, "log", "gitea.log"), logPath, giteaTail(logPath, 40))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("gitea %s at %s, started in %s (dir %s)", GiteaVersion, g.URL, time.Since(began).Round(time.Millisecond), dir)
	return g
}

// CreateRepo creates a public repository owned by Admin, with no commits
// (no auto-init: push its first branch) and main as its default branch, and
// returns its HTTP clone URL (with no credentials in it).
func (g *Gitea) CreateRepo(t testing.TB, name string) (cloneURL string) {
	t.Helper()
	var repo struct {
		CloneURL string `json:"clone_url"`
	}
	g.Do(t, g.Token, http.MethodPost, "/user/repos", map[string]any{
		"name": name, "auto_init": false, "default_branch": "main", "private": false,
	}, &repo)
	if repo.CloneURL == "" {
		t.Fatalf("gitea: creating repository %s gave no clone_url", name)
	}
	return repo.CloneURL
}

// CreateUser creates a second (non-admin) account and returns its access
// token, scope all.
func (g *Gitea) CreateUser(t testing.TB, login string) (token string) {
	t.Helper()
	password := giteaSecret(t, 24)
	g.Do(t, g.Token, http.MethodPost, "/admin/users", map[string]any{
		"username": login, "email": login + "@example.invalid", "password": password,
		"must_change_password": false,
	}, nil)
	// Gitea creates tokens only for a user signed in with a password.
	body, err := json.Marshal(map[string]any{"name": "factory-test", "scopes": []string{"all"}})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, g.API+"/users/"+login+"/tokens", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(login, password)
	req.Header.Set("Content-Type", "application/json")
	var tok struct {
		SHA1 string `json:"sha1"`
	}
	g.send(t, req, &tok)
	if tok.SHA1 == "" {
		t.Fatalf("gitea: the token created for %s is empty", login)
	}
	return tok.SHA1
}

// AddCollaborator gives login a permission ("read" or "write"; Gitea also
// knows "admin") on Admin's repository repo.
func (g *Gitea) AddCollaborator(t testing.TB, repo, login, permission string) {
	t.Helper()
	g.Do(t, g.Token, http.MethodPut, "/repos/"+g.Admin+"/"+repo+"/collaborators/"+login,
		map[string]any{"permission": permission}, nil)
}

// Do makes a JSON API call for a test's setup and checks: path is under
// /api/v1 ("/repos/o/r/pulls"), token may be empty (anonymous), body (if not
// nil) is sent as JSON, and the answer is decoded into out (if not nil). A
// status other than 2xx fails the test with the answer's body.
func (g *Gitea) Do(t testing.TB, token, method, path string, body, out any) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, g.API+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "token "+token)
	}
	g.send(t, req, out)
}

func (g *Gitea) send(t testing.TB, req *http.Request, out any) {
	t.Helper()
	req.Header.Set("Accept", "application/json")
	resp, err := g.client.Do(req)
	if err != nil {
		t.Fatalf("gitea: %s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		t.Fatalf("gitea: %s %s: reading the answer: %v", req.Method, req.URL.Path, err)
	}
	if resp.StatusCode/100 != 2 {
		t.Fatalf("gitea: %s %s: %s: %s", req.Method, req.URL.Path, resp.Status, bytes.TrimSpace(data))
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("gitea: %s %s: decoding the answer: %v\n%s", req.Method, req.URL.Path, err, data)
		}
	}
}

func giteaFreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// giteaSecret is n random bytes, base64url without padding.
func giteaSecret(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// giteaTail is the last n lines of a file, for failure messages.
func giteaTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
