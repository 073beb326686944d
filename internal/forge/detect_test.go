package forge

import (
	"strings"
	"testing"
)

func TestDetect(t *testing.T) {
	for _, tc := range []struct {
		name      string
		remote    string
		kind      Kind
		api, repo string
		want      Target
		err       string // a part of the error; "" for success
		notInErr  string // must not appear in the error
	}{
		{name: "github https", remote: "https://github.com/octo/hello.git",
			want: Target{Kind: GitHub, API: "https://api.github.com", Repo: "octo/hello"}},
		{name: "github https no .git, trailing slash", remote: "https://github.com/octo/hello/",
			want: Target{Kind: GitHub, API: "https://api.github.com", Repo: "octo/hello"}},
		{name: "github scp", remote: "git@github.com:octo/hello.git",
			want: Target{Kind: GitHub, API: "https://api.github.com", Repo: "octo/hello"}},
		{name: "github ssh url", remote: "ssh://git@github.com/octo/hello.git",
			want: Target{Kind: GitHub, API: "https://api.github.com", Repo: "octo/hello"}},
		{name: "github ssh 443", remote: "ssh://git@ssh.github.com:443/octo/hello.git",
			want: Target{Kind: GitHub, API: "https://api.github.com", Repo: "octo/hello"}},
		{name: "github upper-case host", remote: "https://GitHub.com/Octo/Hello.git",
			want: Target{Kind: GitHub, API: "https://api.github.com", Repo: "Octo/Hello"}},
		{name: "github with --forge github", remote: "https://github.com/octo/hello", kind: GitHub,
			want: Target{Kind: GitHub, API: "https://api.github.com", Repo: "octo/hello"}},
		{name: "gitlab.com groups", remote: "https://gitlab.com/group/sub/proj.git",
			want: Target{Kind: GitLab, API: "https://gitlab.com/api/v4", Repo: "group/sub/proj"}},
		{name: "gitlab.com scp groups", remote: "git@gitlab.com:group/sub/deeper/proj.git",
			want: Target{Kind: GitLab, API: "https://gitlab.com/api/v4", Repo: "group/sub/deeper/proj"}},
		{name: "github enterprise", remote: "https://ghe.example.com/octo/hello.git", kind: GitHub,
			want: Target{Kind: GitHub, API: "https://ghe.example.com/api/v3", Repo: "octo/hello"}},
		{name: "gitea https port kept", remote: "https://git.example.com:3000/octo/hello.git", kind: Gitea,
			want: Target{Kind: Gitea, API: "https://git.example.com:3000/api/v1", Repo: "octo/hello"}},
		{name: "gitea ssh port dropped", remote: "ssh://git@git.example.com:2222/octo/hello.git", kind: Gitea,
			want: Target{Kind: Gitea, API: "https://git.example.com/api/v1", Repo: "octo/hello"}},
		{name: "gitea scp", remote: "git@git.example.com:octo/hello.git", kind: Gitea,
			want: Target{Kind: Gitea, API: "https://git.example.com/api/v1", Repo: "octo/hello"}},
		{name: "gitea loopback http", remote: "http://127.0.0.1:3000/octo/hello.git", kind: Gitea,
			want: Target{Kind: Gitea, API: "http://127.0.0.1:3000/api/v1", Repo: "octo/hello"}},
		{name: "gitlab localhost http", remote: "http://localhost:8080/g/s/p.git", kind: GitLab,
			want: Target{Kind: GitLab, API: "http://localhost:8080/api/v4", Repo: "g/s/p"}},
		{name: "ipv6 loopback", remote: "http://[::1]:3000/o/r.git", kind: Gitea,
			want: Target{Kind: Gitea, API: "http://[::1]:3000/api/v1", Repo: "o/r"}},
		{name: "self-hosted gitlab", remote: "git@gitlab.example.org:team/app.git", kind: GitLab,
			want: Target{Kind: GitLab, API: "https://gitlab.example.org/api/v4", Repo: "team/app"}},
		{name: "api override", remote: "https://github.com/octo/hello.git", api: "http://127.0.0.1:9999/",
			want: Target{Kind: GitHub, API: "http://127.0.0.1:9999", Repo: "octo/hello"}},
		{name: "api override with kind on a known host", remote: "https://github.com/octo/hello.git", kind: Gitea, api: "https://mirror.example/api/v1",
			want: Target{Kind: Gitea, API: "https://mirror.example/api/v1", Repo: "octo/hello"}},
		{name: "repo override", remote: "https://github.com/octo/hello.git", repo: "other/name",
			want: Target{Kind: GitHub, API: "https://api.github.com", Repo: "other/name"}},
		{name: "local remote with everything given", remote: "/tmp/bare.git", kind: GitHub, api: "http://127.0.0.1:1234", repo: "o/r",
			want: Target{Kind: GitHub, API: "http://127.0.0.1:1234", Repo: "o/r"}},
		{name: "file remote with everything given", remote: "file:///tmp/bare.git", kind: GitLab, api: "http://127.0.0.1:1234/api/v4", repo: "g/p",
			want: Target{Kind: GitLab, API: "http://127.0.0.1:1234/api/v4", Repo: "g/p"}},
		{name: "no remote, everything given", kind: Gitea, api: "https://h/api/v1", repo: "o/r",
			want: Target{Kind: Gitea, API: "https://h/api/v1", Repo: "o/r"}},

		{name: "unknown host", remote: "https://git.example.com/a/b", err: "cannot tell which forge https://git.example.com/a/b is; pass --forge github|gitea|gitlab"},
		{name: "unknown host scp", remote: "git@git.example.com:a/b.git", err: "cannot tell which forge git@git.example.com:a/b.git is"},
		{name: "unknown kind", remote: "https://github.com/a/b", kind: "bitbucket", err: `unknown forge "bitbucket"`},
		{name: "kind contradicts host", remote: "https://github.com/a/b", kind: GitLab, err: "a github forge, not gitlab"},
		{name: "user and password", remote: "https://alice:s3cret@github.com/a/b.git", err: "remove credentials from the remote URL", notInErr: "s3cret"},
		{name: "token as user", remote: "https://ghp_abcdefSECRET@github.com/a/b.git", err: "GITHUB_TOKEN", notInErr: "SECRET"},
		{name: "oauth2 token", remote: "https://oauth2:glpat-SECRET@gitlab.example.com/a/b.git", kind: GitLab, err: "remove credentials from the remote URL", notInErr: "SECRET"},
		{name: "ssh password", remote: "ssh://git:SECRET@git.example.com/a/b.git", kind: Gitea, err: "remove credentials from the remote URL", notInErr: "SECRET"},
		{name: "credentials even with overrides", remote: "https://x:SECRET@h/a/b.git", kind: Gitea, api: "https://h/api/v1", repo: "a/b", err: "remove credentials from the remote URL", notInErr: "SECRET"},
		{name: "unparsable with credentials", remote: "https://x:SEC%zzRET@h/a/b.git", err: "remove credentials from the remote URL", notInErr: "SEC"},
		{name: "plain http elsewhere", remote: "http://git.example.com/a/b.git", kind: Gitea, err: "plain http"},
		{name: "plain http api", remote: "https://github.com/a/b", api: "http://api.example.com", err: "plain http"},
		{name: "api with credentials", remote: "https://github.com/a/b", api: "https://u:SECRET@api.example.com", err: "credentials", notInErr: "SECRET"},
		{name: "api not a url", remote: "https://github.com/a/b", api: "api.example.com", err: "not an http(s) URL"},
		{name: "api with query", remote: "https://github.com/a/b", api: "https://api.example.com/?x=1", err: "query"},
		{name: "github path too deep", remote: "https://github.com/a/b/c", err: `"a/b/c" is not OWNER/NAME; pass --forge-repo`},
		{name: "gitea path too short", remote: "https://h/b.git", kind: Gitea, err: "is not OWNER/NAME"},
		{name: "gitlab path too short", remote: "https://gitlab.com/b.git", err: "is not a project path"},
		{name: "repo override bad", remote: "https://github.com/a/b", repo: "a/../b", err: "--forge-repo"},
		{name: "repo override dotdot", remote: "https://github.com/a/b", repo: "../b", err: "not a repository path"},
		{name: "repo with space", remote: "https://github.com/a/b", repo: "a/b c", err: "not a repository path"},
		{name: "local path", remote: "/srv/git/a.git", err: "local path"},
		{name: "local path with kind", remote: "../a.git", kind: GitHub, err: "local path"},
		{name: "no remote", err: "no remote URL"},
		{name: "no remote but kind", kind: Gitea, err: "--forge-api"},
		{name: "no remote no repo", kind: Gitea, api: "https://h/api/v1", err: "--forge-repo"},
		{name: "ftp", remote: "ftp://h/a/b", kind: Gitea, err: "ftp://"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Detect(tc.remote, tc.kind, tc.api, tc.repo)
			if tc.err != "" {
				if err == nil {
					t.Fatalf("Detect = %+v, want an error with %q", got, tc.err)
				}
				if !strings.Contains(err.Error(), tc.err) {
					t.Errorf("error %q, want it to say %q", err, tc.err)
				}
				if tc.notInErr != "" && strings.Contains(err.Error(), tc.notInErr) {
					t.Errorf("error %q shows %q", err, tc.notInErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Detect: %v", err)
			}
			if got != tc.want {
				t.Errorf("Detect = %+v, want %+v", got, tc.want)
			}
		})
	}
}
