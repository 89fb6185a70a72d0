import i18n from 'i18next';
import { initReactI18next } from 'react-i18next';
import en from './en';
import zh from './zh';

export type Lang = 'en' | 'zh-CN';
export const languages: { value: Lang; label: string }[] = [
  { value: 'en', label: 'English' },
  { value: 'zh-CN', label: '简体中文' },
];

const storageKey = 'cronix.lang';

export function initialLang(): Lang {
  const saved = typeof localStorage !== 'undefined' ? localStorage.getItem(storageKey) : null;
  if (saved === 'en' || saved === 'zh-CN') return saved;
  const nav = typeof navigator !== 'undefined' ? navigator.language : 'en';
  return nav.toLowerCase().startsWith('zh') ? 'zh-CN' : 'en';
}

export function rememberLang(lang: Lang): void {
  localStorage.setItem(storageKey, lang);
  document.documentElement.lang = lang;
}

void i18n.use(initReactI18next).init({
  resources: { en: { translation: en }, 'zh-CN': { translation: zh } },
  lng: initialLang(),
  fallbackLng: 'en',
  interpolation: { escapeValue: false },
  returnNull: false,
});

export default i18n;
