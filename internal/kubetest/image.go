package kubetest

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// Image is what ImportImage puts in an image besides its files.
type Image struct {
	Entrypoint []string
	Env        []string // KEY=VALUE, as an image config's Env
}

// ImportImage writes an OCI image archive of files (path in the image ->
// file on the host) as one layer, with img's entrypoint, and imports it
// into the kubelet's containerd as ref, so that a pod with
// imagePullPolicy Never runs it: there is no registry to pull from.
func (c *Cluster) ImportImage(t testing.TB, ref string, files map[string]string, img Image) {
	t.Helper()
	if c.ctrd == nil {
		t.Fatal("kubetest: ImportImage before StartKubelet")
	}
	archive := filepath.Join(c.dir, "image-"+strings.NewReplacer("/", "_", ":", "_").Replace(ref)+".tar")
	if err := writeOCIArchive(archive, ref, files, img); err != nil {
		t.Fatalf("kubetest: image %s: %v", ref, err)
	}
	start := time.Now()
	if out, err := c.ctrd.ctr("images", "import", archive); err != nil {
		t.Fatalf("kubetest: ctr images import %s: %v\n%s", ref, err, out)
	}
	t.Logf("kubetest: imported %s in %v", ref, time.Since(start).Round(time.Millisecond))
}

// BinaryFiles is bin and the shared objects ldd says it loads, the
// dynamic loader among them, each at its host path, with bin at
// inImage: the files of an image that runs bin and nothing else.
func BinaryFiles(t testing.TB, bin, inImage string) map[string]string {
	t.Helper()
	out, err := exec.Command("ldd", bin).CombinedOutput()
	files := map[string]string{inImage: bin}
	if err != nil {
		if strings.Contains(string(out), "not a dynamic executable") {
			return files
		}
		t.Fatalf("kubetest: ldd %s: %v\n%s", bin, err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		// "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or
		// "/lib64/ld-linux-x86-64.so.2 (0x...)"; linux-vdso has no file.
		f := strings.Fields(line)
		if i := slices.Index(f, "=>"); i >= 0 {
			f = f[i+1:]
		}
		if len(f) > 0 && filepath.IsAbs(f[0]) {
			files[f[0]] = f[0]
		}
	}
	return files
}

// LibraryPath is LD_LIBRARY_PATH for files' shared objects: an image has
// no ld.so.cache to find them by.
func LibraryPath(files map[string]string) string {
	var dirs []string
	for p := range files {
		if strings.Contains(path.Base(p), ".so") && !slices.Contains(dirs, path.Dir(p)) {
			dirs = append(dirs, path.Dir(p))
		}
	}
	slices.Sort(dirs)
	return "LD_LIBRARY_PATH=" + strings.Join(dirs, ":")
}

// blob is one content-addressed file of an OCI layout.
type blob struct {
	MediaType string            `json:"mediaType"`
	Digest    string            `json:"digest"`
	Size      int               `json:"size"`
	Platform  map[string]string `json:"platform,omitempty"`
	Annots    map[string]string `json:"annotations,omitempty"`
	data      []byte
}

func newBlob(mediaType string, data []byte) blob {
	sum := sha256.Sum256(data)
	return blob{MediaType: mediaType, Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: len(data), data: data}
}

// writeOCIArchive writes an OCI image layout (oci-layout, index.json and
// the blobs: layer, config, manifest) as a tar, as `ctr images import`
// reads it.
func writeOCIArchive(archive, ref string, files map[string]string, img Image) error {
	layerTar, err := layer(files)
	if err != nil {
		return err
	}
	layerBlob := newBlob("application/vnd.oci.image.layer.v1.tar", layerTar)
	cfg, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH, "os": "linux",
		"config": map[string]any{"Entrypoint": img.Entrypoint, "Env": img.Env},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{layerBlob.Digest}},
	})
	if err != nil {
		return err
	}
	cfgBlob := newBlob("application/vnd.oci.image.config.v1+json", cfg)
	man, err := json.Marshal(map[string]any{"schemaVersion": 2,
		"mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config":    cfgBlob, "layers": []blob{layerBlob}})
	if err != nil {
		return err
	}
	manBlob := newBlob("application/vnd.oci.image.manifest.v1+json", man)
	desc := manBlob
	desc.Platform = map[string]string{"architecture": runtime.GOARCH, "os": "linux"}
	// containerd names the image by io.containerd.image.name; the OCI
	// annotation is the tag alone for other tools.
	desc.Annots = map[string]string{"io.containerd.image.name": ref,
		"org.opencontainers.image.ref.name": ref[strings.LastIndex(ref, ":")+1:]}
	index, err := json.Marshal(map[string]any{"schemaVersion": 2, "manifests": []blob{desc}})
	if err != nil {
		return err
	}
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	entries := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
	}
	for _, b := range []blob{layerBlob, cfgBlob, manBlob} {
		entries = append(entries, struct {
			name string
			data []byte
		}{"blobs/sha256/" + strings.TrimPrefix(b.Digest, "sha256:"), b.data})
	}
	for _, e := range entries {
		if err := addFile(tw, e.name, 0o644, e.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return os.WriteFile(archive, out.Bytes(), 0o644)
}

// layer is a tar of files and their parent directories, in a fixed order.
func layer(files map[string]string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	names := make([]string, 0, len(files))
	for p := range files {
		names = append(names, p)
	}
	slices.Sort(names)
	for _, p := range names {
		if !path.IsAbs(p) {
			return nil, fmt.Errorf("%s: a path in the image must be absolute", p)
		}
		for _, d := range parents(path.Dir(p)) {
			if !dirs[d] {
				dirs[d] = true
				hdr := &tar.Header{Typeflag: tar.TypeDir, Name: d[1:] + "/", Mode: 0o755}
				if err := tw.WriteHeader(hdr); err != nil {
					return nil, err
				}
			}
		}
		data, err := os.ReadFile(files[p]) // a symlink's target's content
		if err != nil {
			return nil, err
		}
		st, err := os.Stat(files[p])
		if err != nil {
			return nil, err
		}
		if err := addFile(tw, p[1:], int64(st.Mode().Perm()), data); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), tw.Close()
}

// parents is /a, /a/b, /a/b/c for /a/b/c; none for /.
func parents(dir string) []string {
	var out []string
	for d := dir; d != "/" && d != "."; d = path.Dir(d) {
		out = append([]string{d}, out...)
	}
	return out
}

func addFile(tw *tar.Writer, name string, mode int64, data []byte) error {
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data))}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}
