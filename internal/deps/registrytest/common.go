package registrytest

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"
)

// server is what every registry here is: a static server on 127.0.0.1 that answers only GET and
// HEAD, and remembers the requests it received.
type server struct {
	srv      *httptest.Server
	mu       sync.Mutex
	requests []string
}

// start serves h, recording each request first; the test's cleanup closes the server.
func (s *server) start(t testing.TB, h http.HandlerFunc) {
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s.mu.Lock()
		s.requests = append(s.requests, req.Method+" "+req.URL.RequestURI())
		s.mu.Unlock()
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h(w, req)
	}))
	t.Cleanup(s.srv.Close)
}

// Requests are the requests received so far, each as "METHOD /path" (escaped, as sent).
func (s *server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...)
}

// Close stops the registry, before the test ends: to check that later commands need no network.
func (s *server) Close() { s.srv.Close() }

// archiveTime is every archive entry's time, so that a package's bytes and checksum are the same
// each run.
var archiveTime = time.Date(2020, 2, 2, 0, 0, 0, 0, time.UTC)

// tarGz packs files (by slash path, in name order) as a gzipped tar.
func tarGz(files map[string]string) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		hdr := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(files[name])), ModTime: archiveTime, Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write([]byte(files[name])); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// zipOf packs files (by slash path, in name order) as a zip archive.
func zipOf(files map[string]string) ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		f, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate, Modified: archiveTime})
		if err != nil {
			return nil, err
		}
		if _, err := f.Write([]byte(files[name])); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// prefixed is files with each path under dir.
func prefixed(dir string, files map[string]string) map[string]string {
	out := make(map[string]string, len(files))
	for name, body := range files {
		out[dir+"/"+name] = body
	}
	return out
}
