// The form renderer's own strings (buttons, key labels of free-form
// objects) in the UI's language, so a zh-CN params form is all Chinese.
import { englishStringTranslator, replaceStringParameters, TranslatableString } from '@rjsf/utils';

const zh: Partial<Record<TranslatableString, string>> = {
  [TranslatableString.ArrayItemTitle]: '项',
  [TranslatableString.EmptyArray]: '暂无条目，请用下面的按钮添加。',
  [TranslatableString.YesLabel]: '是',
  [TranslatableString.NoLabel]: '否',
  [TranslatableString.CloseLabel]: '关闭',
  [TranslatableString.ErrorsLabel]: '错误',
  [TranslatableString.NewStringDefault]: '新值',
  [TranslatableString.AddButton]: '添加',
  [TranslatableString.AddItemButton]: '添加条目',
  [TranslatableString.CopyButton]: '复制',
  [TranslatableString.MoveDownButton]: '下移',
  [TranslatableString.MoveUpButton]: '上移',
  [TranslatableString.RemoveButton]: '删除',
  [TranslatableString.ClearLabel]: '清除',
  [TranslatableString.DecrementAriaLabel]: '减 1',
  [TranslatableString.IncrementAriaLabel]: '加 1',
  [TranslatableString.OptionalObjectAdd]: '为可选字段添加数据',
  [TranslatableString.OptionalObjectRemove]: '移除可选字段的数据',
  [TranslatableString.OptionalObjectEmptyMsg]: '可选字段暂无数据',
  [TranslatableString.Type]: '类型',
  [TranslatableString.Value]: '值',
  [TranslatableString.ClearButton]: '清空输入',
  [TranslatableString.OptionPrefix]: '选项 %1',
  [TranslatableString.KeyLabel]: '%1 键',
};

/** formStrings is the form renderer's translateString for lang (English unless zh). */
export function formStrings(lang: string): (s: TranslatableString, params?: string[]) => string {
  if (!lang.startsWith('zh')) return englishStringTranslator;
  return (s, params) => {
    const text = zh[s];
    return text === undefined ? englishStringTranslator(s, params) : replaceStringParameters(text, params);
  };
}
