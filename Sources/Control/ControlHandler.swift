/// What the daemon plugs into the control server: one async answer per request.
/// Authorization is done before this is called.
public protocol ControlHandler: Sendable {
    func handle(_ request: ControlRequest) async -> ControlResponse
}
