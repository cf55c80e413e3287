package supervisor

import (
	"context"
	"os"
	"testing"
)

func BenchmarkZZCost(b *testing.B) {
	s := newSup(b, Config{})
	req := Request{Command: "true", Session: os.Getenv("ZZ_SESSION")}
	for b.Loop() {
		if _, err := s.Run(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}
