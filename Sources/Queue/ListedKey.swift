import PhotolalaCore

/// One key of a listing page, as the inventory records it.
package typealias ListedKey = ListedObject
