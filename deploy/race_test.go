//go:build race

package deploy

// A -race test binary builds corral with -race too, so that CI's deploy
// step reuses what the root module's -race tests compiled.
func init() { raceBuild = true }
