import PhotolalaCore

/// One key of a listing page, as the inventory records it.
public typealias ListedKey = ListedObject
