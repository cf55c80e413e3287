package corral

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryPackageHasDoc fails when a package directory has no doc.go whose
// package comment starts with "Package <name>".
func TestEveryPackageHasDoc(t *testing.T) {
	t.Parallel()
	dirs := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != "." || d.Name() == "testdata" || d.Name() == "peers") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			dirs[filepath.Dir(path)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) == 0 {
		t.Fatal("found no Go packages")
	}
	for dir := range dirs {
		doc := filepath.Join(dir, "doc.go")
		src, err := os.ReadFile(doc)
		if err != nil {
			t.Errorf("%s: package has no doc.go", dir)
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), doc, src, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil {
			t.Errorf("%s: %v", doc, err)
			continue
		}
		want := "Package " + f.Name.Name + " "
		if f.Name.Name == "main" {
			want = "Command " + filepath.Base(dir) + " "
		}
		if f.Doc == nil || !strings.HasPrefix(f.Doc.Text(), want) {
			t.Errorf("%s: package comment must start with %q", doc, want)
		}
	}
}
