// Placeholder so the library has a translation unit until the part lands.
namespace sb {}
