// libqrencode (Debian: libqrencode-dev; at run time libqrencode4): draws the status
// page's sign-in QR code.
#include <qrencode.h>
