package talosapi

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/constants"
	"github.com/siderolabs/talos/pkg/machinery/role"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// Router resolves the nodes a request addresses, as apid does with its `node`
// (one-to-one) and `nodes` (one-to-many) metadata.
type Router interface {
	// Resolve returns the Talos API endpoint (host:port) of the node known by
	// target (its IP or hostname), and whether that node is this one.
	Resolve(target string) (endpoint string, local bool, ok bool)
}

// peers caches client connections to other nodes' APIs.
type peers struct {
	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
	wall  func(talos time.Duration) time.Duration // the run's clock (nil: real time)
}

// PeerConnectTimeout is apid's minimum connect timeout to a peer node, in
// Talos time.
const PeerConnectTimeout = 20 * time.Second

// ConnectFloor bounds from below the scaled connect timeout: a TLS handshake
// over loopback on a loaded machine must not count as an unreachable peer.
const ConnectFloor = 2 * time.Second

// connectParams are apid's reconnect settings for a peer
// (internal/app/apid/pkg/backend/apid.go GetConnection): gRPC's default
// backoff with its delay capped at 15 s instead of 2 minutes, and a 20 s
// minimum connect timeout, all in Talos time.
func (p *peers) connectParams() grpc.ConnectParams {
	d := p.wall
	if d == nil {
		d = func(talos time.Duration) time.Duration { return talos }
	}

	b := backoff.DefaultConfig
	b.BaseDelay, b.MaxDelay = d(b.BaseDelay), d(15*time.Second)

	return grpc.ConnectParams{Backoff: b, MinConnectTimeout: max(d(PeerConnectTimeout), ConnectFloor)}
}

func (p *peers) get(endpoint string, tlsConf *tls.Config) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()

	if c, ok := p.conns[endpoint]; ok {
		return c, nil
	}

	c, err := grpc.NewClient("passthrough:///"+endpoint, grpc.WithTransportCredentials(credentials.NewTLS(tlsConf)),
		grpc.WithConnectParams(p.connectParams()))
	if err != nil {
		return nil, err
	}

	if p.conns == nil {
		p.conns = map[string]*grpc.ClientConn{}
	}

	p.conns[endpoint] = c

	return c, nil
}

func (p *peers) close() {
	p.mu.Lock()
	defer p.mu.Unlock()

	for _, c := range p.conns {
		c.Close() //nolint:errcheck
	}

	p.conns = nil
}

// routeUnary serves requests addressed to other nodes by forwarding them, and
// fans out one-to-many requests, stamping each reply message's metadata with the
// node it came from (apid's behaviour, visible to every talosctl user).
func (s *Server) routeUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if s.opts.Router == nil || s.Mode() != "configured" || (len(md.Get("node")) == 0 && len(md.Get("nodes")) == 0) {
		return handler(ctx, req)
	}

	if err := directorError(md, info.FullMethod); err != nil {
		return nil, err
	}

	if nodes := md.Get("nodes"); len(nodes) > 0 {
		return s.fanOut(ctx, req, info, handler, splitNodes(nodes))
	}

	target := md.Get("node")[0]

	endpoint, local, ok := s.opts.Router.Resolve(target)
	if !ok {
		return nil, status.Errorf(codes.Unavailable, "unknown node %q", target)
	}

	if local {
		return handler(stripRouting(ctx), req)
	}

	return s.forward(ctx, info.FullMethod, req, endpoint)
}

// directorError is what apid's director refuses before routing
// (internal/app/apid/pkg/director/director.go): a `node` given more than once,
// and one-to-many calls of COSI methods.
func directorError(md metadata.MD, method string) error {
	if node := md.Get("node"); len(node) > 1 {
		return status.Error(codes.InvalidArgument, "node metadata must be single-valued")
	}

	if len(md.Get("nodes")) > 0 && strings.HasPrefix(method, "/cosi.") {
		return status.Error(codes.InvalidArgument, "one-2-many proxying is not supported for COSI methods")
	}

	return nil
}

func splitNodes(values []string) []string {
	var out []string

	for _, v := range values {
		for _, n := range strings.Split(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				out = append(out, n)
			}
		}
	}

	return out
}

func stripRouting(ctx context.Context) context.Context {
	md, _ := metadata.FromIncomingContext(ctx)
	md = md.Copy()
	md.Delete("node")
	md.Delete("nodes")

	return metadata.NewIncomingContext(ctx, md)
}

// forward sends the call to another node's API with this node's certificate,
// impersonating the caller's roles, as apid does.
func (s *Server) forward(ctx context.Context, method string, req any, endpoint string) (any, error) {
	conn, out, err := s.peer(ctx, endpoint)
	if err != nil {
		return nil, err
	}

	resp, err := newResponse(method)
	if err != nil {
		return nil, err
	}

	if err := conn.Invoke(out, method, req, resp); err != nil {
		return nil, err
	}

	return resp, nil
}

// peer is the connection to another node's API, with this node's
// certificate, and the context of a call on it that impersonates the
// caller's roles, as apid does.
func (s *Server) peer(ctx context.Context, endpoint string) (*grpc.ClientConn, context.Context, error) {
	tlsConf := s.ClientTLS()
	if tlsConf == nil {
		return nil, nil, status.Error(codes.Unavailable, "node is not ready to proxy")
	}

	conn, err := s.peers.get(endpoint, tlsConf)
	if err != nil {
		return nil, nil, err
	}

	roles, _ := impersonated(ctx, rolesFrom(ctx))

	return conn, metadata.NewOutgoingContext(ctx, metadata.Pairs(constants.APIAuthzRoleMetadataKey, strings.Join(roles.Strings(), ","))), nil
}

func (s *Server) fanOut(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler, nodes []string) (any, error) {
	merged, err := newResponse(info.FullMethod)
	if err != nil {
		return nil, err
	}

	// apid contacts every node at once: a dead one does not hold up the others.
	type answer struct {
		resp any
		err  error
	}

	answers := make([]answer, len(nodes))

	var wg sync.WaitGroup

	for i, n := range nodes {
		wg.Go(func() {
			endpoint, local, ok := s.opts.Router.Resolve(n)

			switch {
			case !ok:
				answers[i].err = fmt.Errorf("unknown node %q", n)
			case local:
				answers[i].resp, answers[i].err = handler(stripRouting(ctx), req)
			default:
				answers[i].resp, answers[i].err = s.forward(stripRouting(ctx), info.FullMethod, req, endpoint)
			}
		})
	}

	wg.Wait()

	for i, n := range nodes {
		if answers[i].err != nil {
			appendError(merged, n, answers[i].err)

			continue
		}

		appendMessages(merged, answers[i].resp.(proto.Message), n)
	}

	return merged, nil
}

// newResponse makes an empty response message of the method's output type.
func newResponse(method string) (proto.Message, error) {
	parts := strings.Split(strings.TrimPrefix(method, "/"), "/")
	if len(parts) != 2 {
		return nil, fmt.Errorf("bad method %q", method)
	}

	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(parts[0]))
	if err != nil {
		return nil, err
	}

	svc, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil, fmt.Errorf("%s is not a service", parts[0])
	}

	m := svc.Methods().ByName(protoreflect.Name(parts[1]))
	if m == nil {
		return nil, fmt.Errorf("unknown method %q", method)
	}

	mt, err := protoregistry.GlobalTypes.FindMessageByName(m.Output().FullName())
	if err != nil {
		return nil, err
	}

	return mt.New().Interface(), nil
}

// appendMessages copies resp's `messages` into merged, setting metadata.hostname.
func appendMessages(merged proto.Message, resp proto.Message, hostname string) {
	src := resp.ProtoReflect()
	dst := merged.ProtoReflect()

	fd := src.Descriptor().Fields().ByName("messages")
	if fd == nil || !fd.IsList() {
		return
	}

	list := src.Get(fd).List()
	out := dst.Mutable(fd).List()

	for i := range list.Len() {
		msg := list.Get(i).Message()
		setMetadata(msg, &common.Metadata{Hostname: hostname})
		out.Append(protoreflect.ValueOfMessage(msg))
	}
}

// appendError adds one message carrying the error in its metadata.
func appendError(merged proto.Message, hostname string, err error) {
	dst := merged.ProtoReflect()

	fd := dst.Descriptor().Fields().ByName("messages")
	if fd == nil || !fd.IsList() {
		return
	}

	out := dst.Mutable(fd).List()
	msg := out.NewElement().Message()
	setMetadata(msg, &common.Metadata{Hostname: hostname, Error: err.Error(), Status: status.Convert(err).Proto()})
	out.Append(protoreflect.ValueOfMessage(msg))
}

func setMetadata(msg protoreflect.Message, md *common.Metadata) {
	fd := msg.Descriptor().Fields().ByName("metadata")
	if fd == nil || fd.Message() == nil || fd.Message().FullName() != (&common.Metadata{}).ProtoReflect().Descriptor().FullName() {
		return
	}

	msg.Set(fd, protoreflect.ValueOfMessage(md.ProtoReflect()))
}

// impersonated returns the roles a peer apid forwarded for its caller.
func impersonated(ctx context.Context, peerRoles role.Set) (role.Set, bool) {
	if !peerRoles.Includes(role.Impersonator) {
		return peerRoles, false
	}

	md, _ := metadata.FromIncomingContext(ctx)

	vals := md.Get(constants.APIAuthzRoleMetadataKey)
	if len(vals) == 0 {
		return peerRoles, false
	}

	roles, _ := role.Parse(strings.Split(vals[0], ","))

	return roles, true
}

// frame is one gRPC message passed through a proxied stream unparsed.
type frame struct{ payload []byte }

// passthroughCodec is proto for everything the node handles itself and raw
// bytes for frames, which is how apid proxies streams without knowing them.
type passthroughCodec struct{}

func (passthroughCodec) Name() string { return "proto" }

func (passthroughCodec) Marshal(v any) ([]byte, error) {
	if f, ok := v.(*frame); ok {
		return f.payload, nil
	}

	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("cannot marshal %T", v)
	}

	return proto.Marshal(m)
}

func (passthroughCodec) Unmarshal(data []byte, v any) error {
	if f, ok := v.(*frame); ok {
		f.payload = append([]byte(nil), data...)

		return nil
	}

	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("cannot unmarshal into %T", v)
	}

	return proto.Unmarshal(data, m)
}

// hasMetadataField reports whether the method's response messages carry
// common.Metadata as field 1, as every Talos API message does.
func hasMetadataField(method string) bool {
	resp, err := newResponse(method)
	if err != nil {
		return false
	}

	fd := resp.ProtoReflect().Descriptor().Fields().ByNumber(1)

	return fd != nil && fd.Message() != nil && fd.Message().FullName() == (&common.Metadata{}).ProtoReflect().Descriptor().FullName()
}

// stampingStream sets metadata.hostname on every message it sends, the way apid
// does: by appending field 1 (common.Metadata) to the encoded message, which
// protobuf merges into the message's metadata.
type stampingStream struct {
	grpc.ServerStream

	hostname string
}

func (s stampingStream) SendMsg(m any) error {
	payload, err := passthroughCodec{}.Marshal(m)
	if err != nil {
		return err
	}

	md, err := proto.Marshal(&common.Metadata{Hostname: s.hostname})
	if err != nil {
		return err
	}

	payload = protowire.AppendTag(payload, 1, protowire.BytesType)
	payload = protowire.AppendBytes(payload, md)

	return s.ServerStream.SendMsg(&frame{payload: payload})
}

// routeStream forwards streams addressed to another node (`node` metadata), as
// apid does for Logs, COSI Watch and friends; `nodes` naming several fans out.
func (s *Server) routeStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx := ss.Context()
	md, _ := metadata.FromIncomingContext(ctx)

	if s.opts.Router == nil || s.Mode() != "configured" || (len(md.Get("node")) == 0 && len(md.Get("nodes")) == 0) {
		return handler(srv, ss)
	}

	if err := directorError(md, info.FullMethod); err != nil {
		return err
	}

	if nodes := splitNodes(md.Get("nodes")); len(nodes) > 0 {
		if len(nodes) > 1 {
			return s.fanOutStream(srv, ss, info, handler, nodes)
		}

		md = md.Copy()
		md.Set("node", nodes[0])

		// One-to-many mode: apid stamps every message with the node it came from
		// (messages of Talos's own APIs, which carry metadata as field 1).
		if hasMetadataField(info.FullMethod) {
			ss = stampingStream{ServerStream: ss, hostname: nodes[0]}
		}
	}

	endpoint, local, ok := s.opts.Router.Resolve(md.Get("node")[0])

	switch {
	case !ok:
		return status.Errorf(codes.Unavailable, "unknown node %q", md.Get("node")[0])
	case local:
		return handler(srv, wrappedStream{ServerStream: ss, ctx: stripRouting(ctx)})
	}

	cs, err := s.peerStream(ctx, endpoint, info.FullMethod)
	if err != nil {
		return err
	}

	go func() {
		for {
			f := &frame{}
			if err := ss.RecvMsg(f); err != nil {
				cs.CloseSend() //nolint:errcheck

				return
			}

			if err := cs.SendMsg(f); err != nil {
				return
			}
		}
	}()

	return receiveAll(cs, func(f *frame) error { return ss.SendMsg(f) })
}

// fanOutStream is apid's one-to-many streaming (the proxy's one2many mode
// for a `nodes` list): the client's request goes to every node at once, and
// their messages are merged as they come, each stamped with the node it came
// from; a node that fails adds one message carrying the error in its metadata
// (internal/app/apid/pkg/backend/apid.go BuildError, streaming). The stream
// ends when every node's has.
func (s *Server) fanOutStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler, nodes []string) error {
	req := &frame{}
	if err := ss.RecvMsg(req); err != nil {
		return err
	}

	ctx := stripRouting(ss.Context())

	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)

	send := func(hostname string, payload []byte) error {
		md, err := proto.Marshal(&common.Metadata{Hostname: hostname})
		if err != nil {
			return err
		}

		payload = protowire.AppendTag(payload, 1, protowire.BytesType)
		payload = protowire.AppendBytes(payload, md)

		mu.Lock()
		defer mu.Unlock()

		return ss.SendMsg(&frame{payload: payload})
	}

	for _, n := range nodes {
		wg.Go(func() {
			out := func(payload []byte) error { return send(n, payload) }

			err := s.streamFrom(ctx, srv, info, handler, n, req, out)
			if err == nil || ctx.Err() != nil {
				return
			}

			msg, merr := proto.Marshal(&common.Empty{Metadata: &common.Metadata{Hostname: n, Error: err.Error(), Status: status.Convert(err).Proto()}})
			if merr == nil {
				out(msg) //nolint:errcheck // the client is gone
			}
		})
	}

	wg.Wait()

	return nil
}

// streamFrom runs one node's part of a fanned-out stream: this node's own
// handler, or the node's API through its peer connection.
func (s *Server) streamFrom(ctx context.Context, srv any, info *grpc.StreamServerInfo, handler grpc.StreamHandler,
	node string, req *frame, out func([]byte) error,
) error {
	endpoint, local, ok := s.opts.Router.Resolve(node)

	switch {
	case !ok:
		return status.Errorf(codes.Unavailable, "unknown node %q", node)
	case local:
		return handler(srv, &captureStream{ctx: ctx, req: req, out: out})
	}

	cs, err := s.peerStream(ctx, endpoint, info.FullMethod)
	if err != nil {
		return err
	}

	if err := cs.SendMsg(req); err != nil {
		return err
	}

	if err := cs.CloseSend(); err != nil {
		return err
	}

	return receiveAll(cs, func(f *frame) error { return out(f.payload) })
}

// receiveAll hands each frame of a peer's stream to send, until the stream
// ends (nil) or fails.
func receiveAll(cs grpc.ClientStream, send func(*frame) error) error {
	for {
		f := &frame{}
		if err := cs.RecvMsg(f); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}

			return err
		}

		if err := send(f); err != nil {
			return err
		}
	}
}

// captureStream is the server stream this node's handler writes to when its
// messages join a fanned-out stream: it reads the one request and hands on
// every message it sends.
type captureStream struct {
	ctx  context.Context //nolint:containedctx
	req  *frame
	out  func([]byte) error
	read bool
}

func (c *captureStream) SetHeader(metadata.MD) error  { return nil }
func (c *captureStream) SendHeader(metadata.MD) error { return nil }
func (c *captureStream) SetTrailer(metadata.MD)       {}
func (c *captureStream) Context() context.Context     { return c.ctx }

func (c *captureStream) SendMsg(m any) error {
	payload, err := passthroughCodec{}.Marshal(m)
	if err != nil {
		return err
	}

	return c.out(payload)
}

func (c *captureStream) RecvMsg(m any) error {
	if c.read {
		return io.EOF
	}

	c.read = true

	return passthroughCodec{}.Unmarshal(c.req.payload, m)
}

// peerStream opens a stream of method to another node's API with this node's
// certificate, impersonating the caller's roles, as apid does.
func (s *Server) peerStream(ctx context.Context, endpoint, method string) (grpc.ClientStream, error) {
	conn, out, err := s.peer(ctx, endpoint)
	if err != nil {
		return nil, err
	}

	return conn.NewStream(out, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method, grpc.ForceCodec(passthroughCodec{}))
}
