import PhotolalaCore

/// How the stages around the queue wake each other. Stages never call one another: a
/// stage moves rows from one state to the next in one transaction, and the signal of the
/// state the rows entered wakes the stage that takes them from there. The database is the
/// truth, a signal only says "look again" (a missed one costs a wait, never a row).
package struct QueueSignals: Sendable {
    /// Files went (back) to waiting for their hash outside a scan: the uploader found a
    /// source changed, or `retry` put back files that could not be read.
    package let needsHash = ChangeFeed()
    /// Objects may be ready to upload: hashes recorded, `retry`, an upload given back.
    package let readyToUpload = ChangeFeed()
    /// Objects became `uploaded` (sent, found in the bucket): the stages that follow the
    /// upload (thumbnails, the device manifest) look for work.
    package let uploaded = ChangeFeed()
    /// `retry` put photos without a preview back to `pending`: the thumbnail stage reads them again.
    package let photosRetried = ChangeFeed()
    /// Photos got their thumbnail and catalog columns (photo rows `ready`): the
    /// catalog stage has rows to publish.
    package let photosReady = ChangeFeed()
    /// A listing of the bucket began, completed or failed: the uploader (waiting for the
    /// first listing after a sign-in) and whoever asks `inventoryPresence` look again.
    package let inventoryChanged = ChangeFeed()
    /// A transaction changed rows: the checkpoint follows once writing stops.
    package let wrote = ChangeFeed()

    package init() {}
}
