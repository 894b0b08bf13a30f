/// What the daemon plugs into the control server: one async answer per request.
/// Authorization is done before this is called.
package protocol ControlHandler: Sendable {
    func handle(_ request: ControlRequest) async -> ControlResponse
}
