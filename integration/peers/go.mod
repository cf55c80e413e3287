module github.com/corral-sh/corral/integration/peers

go 1.26.0

require (
	github.com/corral-sh/corral v0.0.0-00010101000000-000000000000
	github.com/go-cmd/cmd v1.4.4
)

require golang.org/x/sys v0.50.0 // indirect

// The peers module measures corral's neighbours with corral's own benchmark
// kit; corral itself comes from this repository.
replace github.com/corral-sh/corral => ../..
