// Package loopback holds the DNS-rebinding check both of corral's HTTP faces
// (api and api/envd) apply to requests on a loopback address.
package loopback
